"""One front of a cluster: its client of the cluster, the queues it owns, its clock work.

`Front(config, keyspace)` connects to the cluster's seed nodes with redis-py's
asyncio `RedisCluster` (the slot map, MOVED/ASK and the topology after a
failover are the library's) and makes the sink the commit path writes
through (sink.py). `start(core, housekeeping, wake)` routes the server's
requests (router.py), and runs three loops:

- renewal: every lease's term, a third of the lease's time apart; a lease
  not renewed in time is let go (`lose`); a renewal that finds the cluster
  holding fewer of the queue's batches than it acknowledged (a failover lost
  them) has the sink write the queue back at once (`ClusterSink.probe`);
- adoption: queues nobody owns whose clock work is due (a delayed job, an
  expired lease, a schedule, a rate window) are taken by some front within a
  few seconds, so no queue is forgotten when no client asks for it;
- heartbeat: this front's address in `emq:fronts`, for INFO and operators.

Taking a queue (`adopt`): the lease, then the queue's keys into the store
(loader.py), then the sink writes it and housekeeping watches its due times.
Losing it (`lose`: a refused term, a write never acknowledged, a lease not
renewed): the queue's keys leave the store, unlogged (they are the cluster's),
and its parked clients run again, to be forwarded or to take it back.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError

from emqd import clock
from emqd.cluster import scripts
from emqd.cluster.loader import load
from emqd.cluster.names import FRONTS, PREFIX, REGISTRY, front_address, owner_key
from emqd.cluster.ownership import Lease, Leases, address_of
from emqd.cluster.router import ClusterRouter
from emqd.cluster.sink import ClusterSink
from emqd.config import Config
from emqd.core import Core
from emqd.housekeeping import Housekeeping
from emqd.keys import QUEUES, queue_keys
from emqd.store.keyspace import Keyspace

log = logging.getLogger("emqd")

ADOPT_EVERY_S = 1.0  # how often a front looks for queues nobody owns with work due
ADOPT_PER_ROUND = 100  # queues taken in one round at most
HEARTBEAT_S = 1.0
RENEW_RETRY_S = 0.02  # the pause before a lease renewal that failed is tried again


def _nothing() -> None:
    """The wake of a front not started yet."""


def seed_nodes(spec: str) -> list[ClusterNode]:
    """`HOST:PORT[,HOST:PORT...]` as the client's startup nodes."""
    nodes = []
    for part in spec.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--cluster: {part!r} is not HOST:PORT")
        nodes.append(ClusterNode(host.strip("[]"), int(port)))
    return nodes


class Front:
    def __init__(self, config: Config, keyspace: Keyspace) -> None:
        assert config.cluster is not None
        self.config = config
        self.keyspace = keyspace
        self.client = RedisCluster(startup_nodes=seed_nodes(config.cluster),
                                   require_full_coverage=False)
        self.address = front_address(config)
        self.password = config.requirepass
        self.leases = Leases(self.client, self.address, config.cluster_lease_ms)
        # How long a request waits for its queue's owner: a dead owner's lease runs out,
        # then a write the cluster does not take times out.
        self.resolve_s = (config.cluster_lease_ms + config.cluster_timeout_ms) / 1000 + 1
        self.sink = ClusterSink(self.client, config.cluster_acks, config.cluster_timeout_ms,
                                self.lose, self.values_of)
        self.held: dict[bytes, Lease] = {}
        self.terms: dict[bytes, bytes] = {}  # the core's: each owned queue's epoch
        self.taking: dict[bytes, asyncio.Future[bool]] = {}
        self.housekeeping: Housekeeping | None = None
        self.wake: Callable[[], None] = _nothing  # re-runs parked requests (the server's)
        self.tasks: list[asyncio.Task[None]] = []

    async def connect(self) -> None:
        """Read the cluster's topology (raises RedisError when no seed answers)."""
        await self.client.initialize()

    def start(self, core: Core, housekeeping: Housekeeping, wake: Callable[[], None]) -> None:
        """Serve: route `core`'s requests, have `housekeeping` watch the queues taken, and
        `wake` the parked requests of a queue let go."""
        self.housekeeping = housekeeping
        self.wake = wake
        core.router = ClusterRouter(self)
        core.terms = self.terms
        core.add_info("cluster", self.info)
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self._renew()), loop.create_task(self._adopt()),
                      loop.create_task(self._heartbeat())]

    async def close(self) -> None:
        """Shutdown, after the commit path settled: let every lease go, then the client."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for lease in list(self.held.values()):
            try:
                await self.leases.release(lease)
            except RedisError as exc:
                log.warning("cluster: lease on %r not released (%s); it runs out", lease.queue,
                            exc)
        self.held.clear()
        self.sink.close_links()
        await self.client.aclose()

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
        try:
            written = await load(self.client, queue, self.keyspace)
        except BaseException:
            self._drop_keys(queue)
            await self.leases.release(lease)  # its failure carries the load's as context
            raise
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
        self._drop_keys(queue)
        self.wake()  # its parked clients: forwarded, or take it back

    def values_of(self, queue: bytes) -> list[tuple[bytes, Any]]:
        """The queue's keys in the store, with their values (what the sink writes back
        where the cluster lost writes: sink.py `_restore`)."""
        prefix = PREFIX + queue + b"}:"
        return [(key, value) for key, value in self.keyspace.data.items()
                if key.startswith(prefix)]

    def _drop_keys(self, queue: bytes) -> None:
        gone = [key for key, _ in self.values_of(queue)]
        ops: list[Any] = [(b"ZREM", QUEUES, queue)]
        if gone:
            ops.append((b"DEL", *gone))
        self.keyspace.apply(ops)

    # --- what spans queues ------------------------------------------------------------------
    async def registered(self) -> Any:
        """EMQ.QUEUES in cluster mode: the cluster's registry, in creation order."""
        return await self.client.zrange(REGISTRY, 0, -1)

    def info(self) -> dict[str, object]:
        return {"emqd_cluster": "yes", "emqd_cluster_front": self.address.decode(),
                "emqd_cluster_queues_owned": len(self.held)}

    # --- the loops ------------------------------------------------------------------------
    async def _renew(self) -> None:
        every = self.config.cluster_lease_ms / 3000
        pause = every
        while True:
            await asyncio.sleep(pause)
            pause = every
            leases = list(self.held.values())
            acknowledged = [self.sink.acknowledged(lease.queue) for lease in leases]
            # Each renewal gets a third of the lease: a primary that stops answering must
            # not hold the renewal of the queues on every other primary with it.
            results = await asyncio.gather(
                *(asyncio.wait_for(self.leases.renew(lease), every) for lease in leases),
                return_exceptions=True)
            for lease, known, written in zip(leases, acknowledged, results, strict=True):
                if isinstance(written, BaseException):
                    log.debug("cluster: lease on %r not renewed: %s", lease.queue, written)
                    self.sink.refresh_topology()  # its primary may have moved
                    # Again at once, not a third later: a lease is judged held for 0.8 of
                    # its time, so a round that timed out (a renewal meets a primary
                    # that is slow or moving), then a full pause, lost it. RENEW_RETRY_S
                    # keeps a refusal from spinning.
                    pause = RENEW_RETRY_S
                elif self.held.get(lease.queue) is not lease:
                    continue  # let go meanwhile
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
                await self._adopt_round()
            except RedisError as exc:
                log.debug("cluster: no adoption round: %s", exc)

    async def _adopt_round(self) -> None:
        """Take queues nobody owns whose clock work is due. Their owner keys are read in
        one pipeline a node (one MGET a slot), not one round trip a queue: a front asks
        about every queue of the registry it does not hold, each round."""
        names: Any = await self.client.zrange(REGISTRY, 0, -1)
        others = [queue for queue in names if queue not in self.held]
        if not others:
            return
        owners: Any = await self.client.mget_nonatomic([owner_key(queue) for queue in others])
        now = clock.now_ms()
        taken = 0
        for queue, owner in zip(others, owners, strict=True):
            if taken >= ADOPT_PER_ROUND:
                break
            if owner is not None and address_of(owner) != self.address:
                continue
            keys = queue_keys(queue)
            due = await self.client.eval(scripts.DUE, 4, keys.scheduled, keys.active,
                                         keys.repeats, keys.rated)
            if due is not None and float(due) <= now and await self.adopt(queue, owner):
                taken += 1

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self.client.zadd(FRONTS, {self.address: clock.now_ms()})
            except RedisError as exc:
                log.debug("cluster: no heartbeat: %s", exc)
            await asyncio.sleep(HEARTBEAT_S)
