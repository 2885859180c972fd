"""The fronts of a cluster: which are live, which queues each owns, and where a queue belongs.

Three keys, each in a slot of its own, kept by the fronts themselves:

- `emq:fronts` (sorted set): each front's address and its last heartbeat (ms),
  written every HEARTBEAT_S; a front is live while its heartbeat is younger
  than LIVE_MS, and dead once it is older than the lease plus `dead_after_ms`;
- `emq:fronts:info` (hash): each front's address and "RUN_ID HTTP_ADDRESS
  LOAD" (who it is, so that a second process given the same
  `--cluster-announce` is refused at start; where its dashboard is, for the
  others' pages; how many queues it owns, each heartbeat);
- `emq:owned:ADDRESS` (set): the queues the front at ADDRESS owns, added when
  it takes one and removed when it lets one go. When a front dies, the others
  learn from it which queues to take over, without reading every queue's
  owner key: ownership costs O(fronts + busy queues), not O(queues).

A queue nobody owns goes to one of the live fronts by rendezvous hashing with
bounded loads (`place`): the first front, in the order of the hashes of the
pair, that owns fewer queues than its share (all the queues owned, and this
one, over the live fronts, rounded up), so that every front computes nearly
the same answer from the same loads, and 30 queues over 3 fronts are 10 each,
not the 15/11/4 plain hashing gave. When the live fronts change, a front that
owns more than its share lets the ones it ranks lowest go (`surplus`): a front
that joins takes its share as they are next asked for.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Final

from emqd import clock
from emqd.cluster.names import FRONTS
from emqd.cluster.nodes import Topology
from emqd.cluster.ownership import slot_of

FRONTS_INFO: Final = b"emq:fronts:info"
OWNED_PREFIX: Final = b"emq:owned:"
HEARTBEAT_S: Final = 1.0
PLACED_S: Final = 5.0  # a queue sent to a front counts in its load until it says so (at most)
LIVE_MS: Final = 3000  # a front whose heartbeat is older is not live (not given queues)


def owned_key(address: bytes) -> bytes:
    return OWNED_PREFIX + address


def score(front: bytes, queue: bytes) -> bytes:
    """Rendezvous hashing's weight of `front` for `queue` (any front computes the same)."""
    return hashlib.blake2b(front + b"\n" + queue, digest_size=8).digest()


class AnnounceTaken(Exception):
    """Another live front already announces this address."""


class Fronts:
    """This front's view of the others, and its entries in the three keys."""

    def __init__(self, topology: Topology, address: bytes, run_id: bytes, http: bytes,
                 dead_after_ms: int) -> None:
        self.topology = topology
        self.address = address
        self.info = run_id + b" " + http
        self.dead_after_ms = dead_after_ms
        self.live: frozenset[bytes] = frozenset({address})
        self.http: dict[bytes, bytes] = {}  # address -> its dashboard's address
        self.loads: dict[bytes, int] = {}  # address -> queues owned, as it last said
        self.placed: dict[bytes, list[int]] = {}  # address -> when queues were sent there (ms)

    def load(self, front: bytes) -> int:
        """The queues `front` owns, as it said at its last heartbeat, and those this front
        sent it since (which its next heartbeat counts)."""
        placed = self.placed.get(front)
        return self.loads.get(front, 0) + (len(placed) if placed else 0)

    def place(self, queue: bytes) -> bytes:
        """The live front a queue nobody owns goes to (this one, while it knows no other):
        the first in its rendezvous order that owns fewer than its share."""
        fronts = sorted(self.live | {self.address}, key=lambda front: score(front, queue),
                        reverse=True)
        loads = [self.load(front) for front in fronts]
        share = -(-(sum(loads) + 1) // len(fronts))
        return next((front for front, load in zip(fronts, loads, strict=True) if load < share),
                    fronts[0])

    def placed_at(self, front: bytes) -> None:
        """A queue was just sent to `front` to take (its load grows before it says so)."""
        self.placed.setdefault(front, []).append(clock.now_ms())

    def surplus(self, owned: list[bytes]) -> list[bytes]:
        """Of the queues this front owns, those beyond its share among the live fronts,
        the ones it ranks lowest first (let go when the live fronts change)."""
        fronts = self.live | {self.address}
        total = sum(self.loads.get(front, 0) for front in fronts if front != self.address)
        share = -(-(total + len(owned)) // len(fronts))
        ranked = sorted(owned, key=lambda queue: score(self.address, queue))
        return ranked[:max(0, len(owned) - share)]

    async def check_announce(self) -> None:
        """Refuse to start (AnnounceTaken) while another process heartbeats as this
        front's address: two fronts with one address would take each other's queues.
        A heartbeat of an earlier life of this front (a restart) stops advancing, so a
        recent one is watched for a heartbeat's time before it is judged."""
        first = await self._heartbeat_of(self.address)
        if first is None or clock.now_ms() - first[0] > LIVE_MS:
            return
        await asyncio.sleep(HEARTBEAT_S * 1.5)
        second = await self._heartbeat_of(self.address)
        if second is not None and second[0] > first[0] and \
                second[1].split(b" ")[0] != self.info.split(b" ")[0]:
            raise AnnounceTaken(
                f"another live front announces {self.address.decode()} (run "
                f"{second[1].split(b' ')[0][:8].decode()}): give each front its own "
                f"--cluster-announce")

    async def _heartbeat_of(self, address: bytes) -> tuple[int, bytes] | None:
        at = await self.topology.call(slot_of(FRONTS), (b"ZSCORE", FRONTS, address))
        if at is None:
            return None
        info = await self.topology.call(slot_of(FRONTS_INFO), (b"HGET", FRONTS_INFO, address))
        return int(float(at)), info or b""

    async def is_front(self, address: bytes) -> bool:
        """Whether `address` is a front of the cluster's registry (live, or one whose
        heartbeat is old but not yet removed): the only addresses requests go to."""
        if address in self.live:
            return True
        return await self.topology.call(slot_of(FRONTS), (b"ZSCORE", FRONTS, address)) \
            is not None

    async def beat(self, owned: int) -> tuple[frozenset[bytes], list[bytes]]:
        """Write this front's heartbeat and load (`owned` queues); the live fronts now,
        and the dead ones (their heartbeat older than LIVE_MS plus `dead_after_ms`). The
        others' loads and dashboards are read on the way."""
        now = clock.now_ms()
        await self.topology.call(slot_of(FRONTS), (b"ZADD", FRONTS, now, self.address))
        await self.topology.call(slot_of(FRONTS_INFO), (
            b"HSET", FRONTS_INFO, self.address, self.info + b" %d" % owned))
        beats: Any = await self.topology.call(slot_of(FRONTS), (
            b"ZRANGE", FRONTS, now - LIVE_MS, b"+inf", b"BYSCORE", b"WITHSCORES"))
        live = beats[::2]
        dead = await self.topology.call(slot_of(FRONTS), (
            b"ZRANGE", FRONTS, b"-inf", now - LIVE_MS - self.dead_after_ms, b"BYSCORE"))
        infos: Any = await self.topology.call(slot_of(FRONTS_INFO), (b"HGETALL", FRONTS_INFO))
        for front, info in zip(infos[::2], infos[1::2], strict=True):
            _run_id, http, load = (info.split(b" ") + [b"", b""])[:3]
            self.http[front] = http
            self.loads[front] = int(load) if load.isdigit() else 0
        # What a front's heartbeat counted is no longer counted apart: the queues sent it
        # before that heartbeat (or long ago, should it not have taken them).
        said = {front: float(at) for front, at in zip(beats[::2], beats[1::2], strict=True)}
        said[self.address] = now
        for front, placed in list(self.placed.items()):
            placed[:] = [at for at in placed if at > said.get(front, 0) and
                         now - at < PLACED_S * 1000]
            if not placed:
                del self.placed[front]
        self.live = frozenset(live) | {self.address}
        return self.live, list(dead)

    # --- what each front owns -----------------------------------------------------------
    async def owned_by(self, front: bytes) -> list[bytes]:
        owned: Any = await self.topology.call(slot_of(owned_key(front)),
                                              (b"SMEMBERS", owned_key(front)))
        return list(owned)

    async def note(self, queue: bytes, owned: bool, front: bytes | None = None) -> None:
        """`queue` is owned by (or no longer by) `front`, this one by default."""
        key = owned_key(front or self.address)
        await self.topology.call(slot_of(key), (b"SADD" if owned else b"SREM", key, queue))

    async def forget(self, front: bytes) -> None:
        """A dead front whose queues were all taken over leaves the registry."""
        for key, command in ((FRONTS, b"ZREM"), (FRONTS_INFO, b"HDEL")):
            await self.topology.call(slot_of(key), (command, key, front))
        await self.topology.call(slot_of(owned_key(front)), (b"DEL", owned_key(front)))

    async def leave(self) -> None:
        """A clean shutdown, once its leases are let go: out of the registry at once."""
        await self.forget(self.address)
