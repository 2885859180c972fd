"""One owner per queue: a lease key in the queue's own slot, judged on a monotonic clock.

A front takes a queue with `SET emq:{QUEUE}:owner "TERM ADDRESS" NX PX lease`:
TERM is 40 random hex digits drawn for this taking, ADDRESS where other fronts
forward the queue's requests. The value is the fence every write of the queue
shows the cluster (sink.py's APPLY compares it), and TERM is the epoch of the
leases on jobs this owner grants (protocol section 6.1): when the queue moves
(its owner died, stopped, or lost the lease), the new owner's stall sweep
exempts the leases of the old term, as after a restart.

The owner renews its leases a third of the lease's time apart, all of one
primary's in one script call (`renew`: `scripts.RENEW`, which extends each
key only if the value is still its own and answers how many of the queue's
batches the cluster holds, so that a failover that lost some is noticed
without waiting for a write), and holds each queue until
`valid_until`: the monotonic time it sent its last successful renewal, plus
the lease, less a margin. A front that was stopped (SIGSTOP) past that sees
it at once when it runs again, before it serves the queue, and the cluster
refuses its writes anyway (the term check). On a clean shutdown it deletes
the key (`RELEASE`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot

from emqd.cluster import scripts
from emqd.cluster.names import owner_key, written_key
from emqd.cluster.nodes import FAILED, Address, Topology
from emqd.wire.resp import encode_request

MARGIN = 0.2  # a lease counts as held for this much less than its length (clock drift)
RENEW_CHUNK = 1000  # leases renewed by one script call at most
_RENEW = scripts.RENEW.encode()


def new_term() -> bytes:
    return secrets.token_hex(20).encode()


def owner_value(term: bytes, address: bytes) -> bytes:
    return term + b" " + address


def address_of(value: bytes) -> bytes:
    """The address in an owner key's value."""
    return value.partition(b" ")[2]


def term_of(value: bytes) -> bytes:
    return value.partition(b" ")[0]


def _renewal(leases: Sequence[Lease], indexes: list[int], lease_ms: int) -> bytes:
    """The RENEW call of the leases at `indexes`, as RESP."""
    argv = [b"EVAL", _RENEW, b"0", b"%d" % lease_ms]
    for i in indexes:
        queue = leases[i].queue
        argv += [owner_key(queue), written_key(queue), leases[i].value]
    return encode_request(argv)


def slot_of(queue: bytes) -> int:
    """The hash slot of every key of `queue`."""
    # Typed here: pip's isolated build has no redis-py, so key_slot is Any there, and
    # returning Any failed the compiled build's strict check (`pip install .`).
    slot: int = key_slot(owner_key(queue))
    return slot


class Lease:
    """This front's hold on one queue."""

    __slots__ = ("queue", "value", "term", "valid_until", "slot")

    def __init__(self, queue: bytes, value: bytes, valid_until: float) -> None:
        self.queue = queue
        self.value = value
        self.term = term_of(value)
        self.valid_until = valid_until  # monotonic seconds
        self.slot = slot_of(queue)

    def valid(self, now: float) -> bool:
        return now < self.valid_until


class Leases:
    """Taking, renewing and letting go of leases; the clock is `time.monotonic`. Every
    call is bounded (the topology's write timeout, or the renewal's own)."""

    def __init__(self, topology: Topology, address: bytes, lease_ms: int) -> None:
        self.topology = topology
        self.address = address
        self.lease_ms = lease_ms
        self.held_s = lease_ms / 1000 * (1 - MARGIN)

    async def take(self, queue: bytes) -> Lease | None:
        """The lease on `queue` if nobody holds it (None if somebody does)."""
        value = owner_value(new_term(), self.address)
        sent = time.monotonic()
        taken = await self.topology.call(slot_of(queue), (
            b"SET", owner_key(queue), value, b"NX", b"PX", self.lease_ms))
        return Lease(queue, value, sent + self.held_s) if taken else None

    async def take_back(self, queue: bytes, seen: bytes) -> Lease | None:
        """A lease with this front's address that this process does not hold (an earlier
        life's, not run out yet): taken over under a new term if it is still `seen`."""
        value = owner_value(new_term(), self.address)
        sent = time.monotonic()
        taken = await self.topology.call(slot_of(queue), (
            b"EVAL", scripts.TAKE_BACK, 1, owner_key(queue), seen, value, self.lease_ms))
        return Lease(queue, value, sent + self.held_s) if taken else None

    async def owner(self, queue: bytes, timeout: float | None = None) -> bytes | None:
        """The value of the queue's owner key, if any front holds it."""
        value = await self.topology.call(slot_of(queue), (b"GET", owner_key(queue)), timeout)
        return value if isinstance(value, bytes) else None

    async def renew(self, leases: Sequence[Lease], timeout: float) -> list[Any]:
        """Extend each lease that is still ours (`valid_until` moves on). For each, in
        order: the number of the queue's last batch the cluster holds, -1 when the lease
        is another's, or what kept it from being renewed (an exception, or a node's
        error reply). A primary's leases go in one script call (`scripts.RENEW`, up to
        RENEW_CHUNK a call), each primary's apart, so ten thousand leases cost each
        primary a call a round, and one that stops answering holds up only its own,
        `timeout` at most."""
        sent = time.monotonic()
        results: list[Any] = [None] * len(leases)
        groups = self.topology.by_primary([lease.slot for lease in leases])

        async def one_node(address: Address | None, indexes: list[int]) -> None:
            if address is None:
                for i in indexes:
                    results[i] = ConnectionError("no node serves the queue's slot")
                return
            chunks = [indexes[at:at + RENEW_CHUNK] for at in range(0, len(indexes),
                                                                    RENEW_CHUNK)]
            calls = [_renewal(leases, chunk, self.lease_ms) for chunk in chunks]
            try:
                replies = await self.topology.pipe(address).exchange(calls, timeout)
            except FAILED as exc:
                replies = [exc] * len(chunks)
            for chunk, reply in zip(chunks, replies, strict=True):
                answers = reply if isinstance(reply, list) else [reply] * len(chunk)
                for i, answer in zip(chunk, answers, strict=True):
                    results[i] = answer

        await asyncio.gather(*(one_node(address, indexes)
                               for address, indexes in groups.items()))
        for lease, result in zip(leases, results, strict=True):
            if type(result) is int and result >= 0:
                lease.valid_until = max(lease.valid_until, sent + self.held_s)
        if any(type(result) is not int for result in results):
            self.topology.refresh()  # a primary may have moved (MOVED, a non-local key)
        return results

    async def release(self, lease: Lease) -> None:
        await self.topology.call(lease.slot, (b"EVAL", scripts.RELEASE, 1,
                                              owner_key(lease.queue), lease.value))

