"""One owner per queue: a lease key in the queue's own slot, judged on a monotonic clock.

A front takes a queue with `SET emq:{QUEUE}:owner "TERM ADDRESS" NX PX lease`:
TERM is 40 random hex digits drawn for this taking, ADDRESS where other fronts
forward the queue's requests. The value is the fence every write of the queue
shows the cluster (sink.py's APPLY compares it), and TERM is the epoch of the
leases on jobs this owner grants (protocol section 6.1): when the queue moves
(its owner died, stopped, or lost the lease), the new owner's stall sweep
exempts the leases of the old term, as after a restart.

The owner renews every lease a third of the lease's time (`scripts.RENEW`,
only if the value is still its own; the answer also says how many of the
queue's batches the cluster holds, so that a failover that lost some is
noticed without waiting for a write) and holds the queue until `valid_until`:
the monotonic time it sent its last successful renewal, plus the lease, less
a margin. A front that was stopped (SIGSTOP) past that sees it at once when
it runs again, before it serves the queue, and the cluster refuses its writes
anyway (the term check). On a clean shutdown it deletes the key (`RELEASE`).
"""

from __future__ import annotations

import secrets
import time

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from emqd.cluster import scripts
from emqd.cluster.names import owner_key, written_key

MARGIN = 0.2  # a lease counts as held for this much less than its length (clock drift)


def new_term() -> bytes:
    return secrets.token_hex(20).encode()


def owner_value(term: bytes, address: bytes) -> bytes:
    return term + b" " + address


def address_of(value: bytes) -> bytes:
    """The address in an owner key's value."""
    return value.partition(b" ")[2]


def term_of(value: bytes) -> bytes:
    return value.partition(b" ")[0]


class Lease:
    """This front's hold on one queue."""

    __slots__ = ("queue", "value", "term", "valid_until")

    def __init__(self, queue: bytes, value: bytes, valid_until: float) -> None:
        self.queue = queue
        self.value = value
        self.term = term_of(value)
        self.valid_until = valid_until  # monotonic seconds

    def valid(self, now: float) -> bool:
        return now < self.valid_until


class Leases:
    """Taking, renewing and letting go of leases; the clock is `time.monotonic`."""

    def __init__(self, client: RedisCluster, address: bytes, lease_ms: int) -> None:
        self.client = client
        self.address = address
        self.lease_ms = lease_ms
        self.held_s = lease_ms / 1000 * (1 - MARGIN)

    async def take(self, queue: bytes) -> Lease | None:
        """The lease on `queue` if nobody holds it (None if somebody does)."""
        value = owner_value(new_term(), self.address)
        sent = time.monotonic()
        taken = await self.client.set(owner_key(queue), value, nx=True, px=self.lease_ms)
        return Lease(queue, value, sent + self.held_s) if taken else None

    async def take_back(self, queue: bytes, seen: bytes) -> Lease | None:
        """A lease with this front's address that this process does not hold (an earlier
        life's, not run out yet): taken over under a new term if it is still `seen`."""
        value = owner_value(new_term(), self.address)
        sent = time.monotonic()
        taken = await self.client.eval(scripts.TAKE_BACK, 1, owner_key(queue), seen, value,
                                       self.lease_ms)
        return Lease(queue, value, sent + self.held_s) if taken else None

    async def owner(self, queue: bytes) -> bytes | None:
        """The value of the queue's owner key, if any front holds it."""
        value = await self.client.get(owner_key(queue))
        return value if isinstance(value, bytes) else None

    async def renew(self, lease: Lease) -> int:
        """Extend the lease if it is still ours (`valid_until` moves on) and answer the
        number of the queue's last batch the cluster holds; -1 when it is not ours.

        Sent to the slot's primary as the client last knew it, not through the
        client's command path: that path may first re-read the topology (redis-py
        8.2 does so in the first command after an error) and wait for a re-read
        under way, and a re-read that asks a node which stopped answering held every
        queue's renewal behind that one node. A primary that moved answers MOVED,
        the renewal fails, and the front has the topology read again."""
        sent = time.monotonic()
        node = self.client.nodes_manager.get_node_from_slot(key_slot(owner_key(lease.queue)))
        written = int(await node.execute_command(
            "EVAL", scripts.RENEW, 2, owner_key(lease.queue), written_key(lease.queue),
            lease.value, self.lease_ms))
        if written >= 0:
            lease.valid_until = max(lease.valid_until, sent + self.held_s)
        return written

    async def release(self, lease: Lease) -> None:
        await self.client.eval(scripts.RELEASE, 1, owner_key(lease.queue), lease.value)
