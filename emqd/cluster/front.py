"""One front of a cluster: its view of the cluster, the queues it owns, its clock work.

`Front(config)` makes the front's client of the cluster (nodes.py: the slot
map and a pipelined connection a node, every request bounded by
`--cluster-timeout-ms`), the sink the commit path writes through (sink.py)
and the router the dispatcher asks (router.py); the server hands the core
both. `start(core, housekeeping, wake)` then runs four loops:

- renewal: every lease's term, a third of the lease's time apart, a primary's
  in one pipeline; a lease not renewed in time is let go (`lose`); a renewal
  that finds the cluster holding fewer of the queue's batches than it
  acknowledged (a failover lost them) has the sink write the queue back at once
  (`ClusterSink.probe`);
- adoption: queues nobody owns with work to do now (a pending job, a delayed
  job due, an expired lease, a schedule, a rate window) are taken by some
  front within a few seconds, so no queue is forgotten when no client asks;
- topology: the slot map read again every second (the replicas a write waits
  for are those of the map of the moment: sink.py `acks_for`);
- heartbeat: this front's address in `emq:fronts`, for INFO and operators.

Taking a queue (`adopt`): the lease, then the queue's keys into the store (the
lease is renewed while they load), then the sink writes it and housekeeping
watches its due times. Losing it (`lose`: a refused term, a write never
acknowledged, a lease not renewed): the queue's keys leave the store,
unlogged (they are the cluster's), and its parked clients run again, to be
forwarded or to take it back.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from emqd import clock
from emqd.cluster import scripts
from emqd.cluster.loader import load
from emqd.cluster.names import FRONTS, PREFIX, REGISTRY, front_address, owner_key
from emqd.cluster.nodes import FAILED, Topology, parse_address
from emqd.cluster.ownership import Lease, Leases, address_of, slot_of
from emqd.cluster.router import ClusterRouter
from emqd.cluster.sink import ClusterSink
from emqd.commit import Commit
from emqd.config import Config
from emqd.core import Core
from emqd.housekeeping import Housekeeping
from emqd.keys import queue_keys
from emqd.store.keyspace import Keyspace
from emqd.wire.resp import encode_request

log = logging.getLogger("emqd")

ADOPT_EVERY_S = 1.0  # how often a front looks for queues nobody owns with work due
ADOPT_PER_ROUND = 100  # queues taken in one round at most
HEARTBEAT_S = 1.0
TOPOLOGY_EVERY_S = 1.0  # the slot map (and each shard's replicas) read again this often
RENEW_RETRY_S = 0.02  # the pause before a lease renewal that failed is tried again
_DUE = scripts.DUE.encode()


def _nothing() -> None:
    """The wake of a front not started yet."""


def seed_addresses(spec: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` as the topology's seeds."""
    try:
        return [parse_address(part) for part in spec.split(",")]
    except ValueError as exc:
        raise ValueError(f"--cluster: {exc}") from None


class Front:
    def __init__(self, config: Config) -> None:
        assert config.cluster is not None
        self.config = config
        self.topology = Topology(seed_addresses(config.cluster),
                                 config.cluster_timeout_ms / 1000)
        self.address = front_address(config)
        self.password = config.requirepass
        self.leases = Leases(self.topology, self.address, config.cluster_lease_ms)
        self.lease_s = config.cluster_lease_ms / 1000
        self.timeout_s = config.cluster_timeout_ms / 1000
        self.sink = ClusterSink(self.topology, config.cluster_acks, config.cluster_timeout_ms,
                                self.lose, self.values_of)
        self.held: dict[bytes, Lease] = {}
        self.loading: dict[bytes, Lease] = {}  # leases taken, their queues not loaded yet
        self.terms: dict[bytes, bytes] = {}  # each owned queue's epoch (the core's `epoch_of`)
        self.taking: dict[bytes, asyncio.Future[bool]] = {}
        self.router = ClusterRouter(self)
        self.keyspace: Keyspace | None = None
        self.commit: Commit | None = None
        self.housekeeping: Housekeeping | None = None
        self.wake: Callable[[], None] = _nothing  # re-runs parked requests (the server's)
        self.tasks: list[asyncio.Task[None]] = []

    async def connect(self) -> None:
        """Read the cluster's slot map (ConnectionError when no seed answers)."""
        if not await self.topology.refresh():
            raise ConnectionError(f"no node of the cluster at {self.config.cluster} answered "
                                  f"with a slot map")

    def start(self, core: Core, housekeeping: Housekeeping, wake: Callable[[], None]) -> None:
        """Serve `core`'s requests (its router and sink are this front's): have
        `housekeeping` watch the queues taken, and `wake` the parked requests of a queue
        let go."""
        self.keyspace = core.keyspace
        self.commit = core.commit
        self.housekeeping = housekeeping
        self.wake = wake
        core.add_info("cluster", self.info)
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self._renew()), loop.create_task(self._adopt()),
                      loop.create_task(self._heartbeat()), loop.create_task(self._reread())]

    async def close(self) -> None:
        """Shutdown, after the commit path settled: let every lease go, then the client."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        results = await asyncio.gather(*(self.leases.release(lease)
                                         for lease in self.held.values()),
                                       return_exceptions=True)
        for lease, result in zip(list(self.held.values()), results, strict=True):
            if isinstance(result, BaseException):
                log.warning("cluster: lease on %r not released (%s); it runs out",
                            lease.queue, result)
        self.held.clear()
        self.sink.close_links()
        self.topology.close()

    # --- owning --------------------------------------------------------------------------
    def serves(self, queue: bytes) -> bool:
        """Whether this front holds `queue` now (a lease past its time is let go here)."""
        lease = self.held.get(queue)
        if lease is None:
            return False
        if lease.valid(time.monotonic()):
            return True
        log.warning("cluster: the lease on %r ran out before it was renewed; letting go",
                    queue)
        self.lose(queue)
        return False

    async def adopt(self, queue: bytes, seen: bytes | None) -> bool:
        """Take `queue` if nobody holds it (`seen` None) or an earlier life of this front
        does (`seen`, its owner value): True once it is loaded and served here."""
        if queue in self.held:
            return True
        taking = self.taking.get(queue)
        if taking is None:
            taking = self.taking[queue] = asyncio.ensure_future(self._take(queue, seen))
            taking.add_done_callback(lambda _: self.taking.pop(queue, None))
        return await asyncio.shield(taking)

    async def _take(self, queue: bytes, seen: bytes | None) -> bool:
        lease = await (self.leases.take(queue) if seen is None
                       else self.leases.take_back(queue, seen))
        if lease is None:
            return False
        self.loading[queue] = lease  # renewed while the queue loads (a big one takes a while)
        try:
            ops, written = await load(self.topology, queue)
        except BaseException:
            self.loading.pop(queue, None)
            try:
                await self.leases.release(lease)
            except FAILED as exc:
                log.debug("cluster: lease on %r not released after a failed load (%s)",
                          queue, exc)
            raise
        self.loading.pop(queue, None)
        if not lease.valid(time.monotonic()):
            log.warning("cluster: the lease on %r ran out while the queue loaded", queue)
            return False
        assert self.commit is not None
        self.commit.mirror(ops)
        self.held[queue] = lease
        self.terms[queue] = lease.term
        self.sink.own(queue, lease.value, written)
        if self.housekeeping is not None:
            self.housekeeping.watch(queue)
        log.info("cluster: owning queue %r (term %s)", queue, lease.term[:8].decode())
        return True

    def lose(self, queue: bytes) -> None:
        """Let `queue` go: its unkept writes fail, its keys leave the store (unlogged)."""
        if self.held.pop(queue, None) is None:
            return
        self.terms.pop(queue, None)
        self.sink.disown(queue)
        gone = [key for key, _ in self.values_of(queue)]
        assert self.commit is not None
        self.commit.mirror([(b"ZREM", REGISTRY, queue), *([(b"DEL", *gone)] if gone else [])])
        self.wake()  # its parked clients: forwarded, or take it back

    def values_of(self, queue: bytes) -> list[tuple[bytes, Any]]:
        """The queue's keys in the store, with their values (what the sink writes back
        where the cluster lost writes: sink.py `_restore`)."""
        assert self.keyspace is not None
        return self.keyspace.with_prefix(PREFIX + queue + b"}:")

    # --- what spans queues ------------------------------------------------------------------
    async def registered(self) -> Any:
        """EMQ.QUEUES in cluster mode: the cluster's registry, in creation order."""
        return await self.topology.call(slot_of(REGISTRY), (b"ZRANGE", REGISTRY, 0, -1))

    def info(self) -> dict[str, object]:
        return {"emqd_cluster": "yes", "emqd_cluster_front": self.address.decode(),
                "emqd_cluster_queues_owned": len(self.held),
                "emqd_cluster_topology_reads": self.topology.reads}

    # --- the loops ------------------------------------------------------------------------
    async def _renew(self) -> None:
        every = self.lease_s / 3
        pause = every
        while True:
            await asyncio.sleep(pause)
            pause = every
            leases = [*self.held.values(), *self.loading.values()]
            if not leases:
                continue
            acknowledged = [self.sink.acknowledged(lease.queue) for lease in leases]
            # Each primary's renewals get a third of the lease: one that stops answering
            # must not hold the renewal of the queues on every other primary with it.
            results = await self.leases.renew(leases, every)
            for lease, known, written in zip(leases, acknowledged, results, strict=True):
                if type(written) is not int:
                    log.debug("cluster: lease on %r not renewed: %s", lease.queue, written)
                    # Again at once, not a third later: a lease is judged held for 0.8 of
                    # its time, so a round that timed out (a renewal meets a primary
                    # that is slow or moving), then a full pause, lost it. RENEW_RETRY_S
                    # keeps a refusal from spinning.
                    pause = RENEW_RETRY_S
                elif self.held.get(lease.queue) is not lease:
                    continue  # still loading, or let go meanwhile
                elif written < 0:
                    log.warning("cluster: lost the lease on %r to another front", lease.queue)
                    self.lose(lease.queue)
                elif known is not None and written < known:
                    log.warning("cluster: the cluster holds %d of queue %r's batches, %d were "
                                "acknowledged; finding the gap", written, lease.queue, known)
                    self.sink.probe(lease.queue)

    async def _adopt(self) -> None:
        while True:
            await asyncio.sleep(ADOPT_EVERY_S * (0.5 + random.random()))
            try:
                await asyncio.wait_for(self._adopt_round(), self.lease_s + self.timeout_s)
            except (*FAILED, ValueError) as exc:
                log.debug("cluster: no adoption round: %s", exc)

    async def _adopt_round(self) -> None:
        """Take queues nobody owns with work to do now. Their owner keys, then the due
        times of those nobody owns, are read in one pipeline a primary
        (`Topology.scatter`), not one round trip a queue."""
        names: Any = await self.registered()
        others = [queue for queue in names if queue not in self.held
                  and queue not in self.taking]
        if not others:
            return
        owners = await self.topology.scatter(
            [(slot_of(queue), encode_request((b"GET", owner_key(queue)))) for queue in others],
            self.timeout_s)
        free = [(queue, owner) for queue, owner in zip(others, owners, strict=True)
                if owner is None or (type(owner) is bytes and address_of(owner) == self.address)]
        if not free:
            return
        dues = await self.topology.scatter([(slot_of(queue), _due_request(queue))
                                            for queue, _ in free], self.timeout_s)
        now = clock.now_ms()
        taken = 0
        for (queue, owner), due in zip(free, dues, strict=True):
            if taken >= ADOPT_PER_ROUND:
                break
            if type(due) is bytes and float(due) <= now and await self.adopt(queue, owner):
                taken += 1

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self.topology.call(slot_of(FRONTS),
                                         (b"ZADD", FRONTS, clock.now_ms(), self.address))
            except FAILED as exc:
                log.debug("cluster: no heartbeat: %s", exc)
            await asyncio.sleep(HEARTBEAT_S)

    async def _reread(self) -> None:
        while True:
            await asyncio.sleep(TOPOLOGY_EVERY_S)
            await self.topology.refresh()


def _due_request(queue: bytes) -> bytes:
    """DUE of a queue (scripts.py): when its clock work is next due, 0 with jobs pending."""
    keys = queue_keys(queue)
    return encode_request((b"EVAL", _DUE, b"6", keys.pending, keys.ring, keys.scheduled,
                           keys.active, keys.repeats, keys.rated))
