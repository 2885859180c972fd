"""One front of a cluster: its view of the cluster, the queues it owns, its clock work.

`Front(config)` makes the front's client of the cluster (nodes.py: the slot
map and a pipelined connection a node, every request bounded by
`--cluster-timeout-ms`), its place among the fronts (fronts.py), the sink
the commit path writes through (sink.py) and the router the dispatcher asks
(router.py); the server hands the core both. Ownership costs O(fronts + busy
queues), never O(queues): a front owns a queue while it is used, and the
loops that `start` runs are

- renewal: every lease, a third of the lease's time apart, a primary's in one
  script call; a lease not renewed in time is let go (`lose`); a renewal that
  finds the cluster holding fewer of the queue's batches than it acknowledged
  (a failover lost them) has the sink write the queue back
  (`ClusterSink.probe`);
- heartbeat: this front and its load in `emq:fronts`, the live fronts and
  their loads read back; when they change, the queues this front owns beyond
  its share are handed over (`release`), and the queues a dead front owned
  (its `emq:owned:` set) are taken by the fronts they now go to;
- dues: queues nobody owns whose clock work is due (`emq:dues`: a delayed
  job, a lease, a schedule, a rate window, written by the front that let the
  queue go) are taken by the front they belong to, within a second or two;
- idle: a queue with no request for `--cluster-idle-ms`, no job running and no
  batch on its way is let go, its next due time in `emq:dues`;
- a safety scan of every queue of the registry, once a minute, for work due
  that the above missed (a front that died between its steps);
- topology: the slot map read again every second.

Taking a queue (`adopt`): the lease, the front's `emq:owned:` set, then the
queue's keys into the store (the lease renewed while they load), then the sink
writes it and housekeeping watches its due times. Letting it go cleanly
(`release`: idle, handed over, shutdown): no new request runs it, its metrics
history's minute in progress is closed (housekeeping.close_minutes), its batches
settle, its due time is noted, its keys leave the store and its lease is
deleted, then its parked clients go where it is now. Losing it (`lose`: a
refused term, a write never acknowledged, a lease not renewed): its unkept
writes fail at once, its keys leave the store, and its parked clients run
again, to be forwarded or to take it back.
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
from emqd.cluster.fronts import HEARTBEAT_S, Fronts
from emqd.cluster.loader import SLICE, load
from emqd.cluster.names import DUES, PREFIX, REGISTRY, front_address, owner_key
from emqd.cluster.nodes import FAILED, Topology, parse_address
from emqd.cluster.ownership import Lease, Leases, address_of, new_term, slot_of
from emqd.cluster.router import ClusterRouter
from emqd.cluster.sink import ClusterSink
from emqd.commit.path import Commit
from emqd.commit.plan import Op
from emqd.config import Config
from emqd.core import Core
from emqd.layout import queue_keys
from emqd.serve.housekeeping import Housekeeping
from emqd.store.keyspace import Keyspace
from emqd.wire.resp import encode_request

log = logging.getLogger("emqd")

ADOPT_EVERY_S = 1.0  # how often a front looks for queues nobody owns with work due
ADOPT_PER_ROUND = 100  # queues taken in one round at most
SCAN_EVERY_S = 60.0  # the safety scan of every queue of the registry
IDLE_CHECK_S = 1.0  # how often the queues owned are looked at for idleness
TOPOLOGY_EVERY_S = 1.0  # the slot map (and each shard's replicas) read again this often
RENEW_RETRY_S = 0.02  # the pause before a lease renewal that failed is tried again
SHED_S = 3.0  # a queue handed over is not taken back here this long (others' views catch up)
_DUE = scripts.DUE.encode()


def _nothing() -> None:
    """The wake of a front not started yet."""


def seed_addresses(spec: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` as the topology's seeds."""
    try:
        return [parse_address(part) for part in spec.split(",")]
    except ValueError as exc:
        raise ValueError(f"--cluster: {exc}") from None


def node_auth(config: Config) -> tuple[bytes, ...]:
    """AUTH's arguments for the cluster's nodes (none: they ask for none)."""
    if config.cluster_password is None:
        return ()
    user = (config.cluster_user.encode(),) if config.cluster_user else ()
    return (*user, config.cluster_password.encode())


def dashboard_address(config: Config, address: bytes) -> bytes:
    """Where this front's dashboard is, for the other fronts' pages (empty: none)."""
    if not config.http_port:
        return b""
    return address.rpartition(b":")[0] + b":%d" % config.http_port


class Front:
    def __init__(self, config: Config) -> None:
        assert config.cluster is not None
        self.config = config
        self.topology = Topology(seed_addresses(config.cluster),
                                 config.cluster_timeout_ms / 1000, node_auth(config))
        self.address = front_address(config)
        self.password = config.requirepass
        self.leases = Leases(self.topology, self.address, config.cluster_lease_ms)
        self.lease_s = config.cluster_lease_ms / 1000
        self.timeout_s = config.cluster_timeout_ms / 1000
        self.idle_s = config.cluster_idle_ms / 1000
        self.fronts = Fronts(self.topology, self.address, new_term(),
                             dashboard_address(config, self.address),
                             config.cluster_lease_ms)
        self.sink = ClusterSink(self.topology, config.cluster_acks, config.cluster_timeout_ms,
                                self.lose, self.values_of)
        self.held: dict[bytes, Lease] = {}
        self.loading: dict[bytes, Lease] = {}  # leases taken, their queues not loaded yet
        self.leaving: dict[bytes, asyncio.Future[None]] = {}  # let go, settling first
        self.terms: dict[bytes, bytes] = {}  # each owned queue's epoch (the core's `epoch_of`)
        self.taking: dict[bytes, asyncio.Future[bool]] = {}
        self.used: dict[bytes, float] = {}  # queue -> when a request last ran it (monotonic)
        # Queues handed over as beyond this front's share, and until when a front that
        # forwards one here (its view of the fronts a heartbeat old) is told to look again.
        self.shed: dict[bytes, float] = {}
        self.router = ClusterRouter(self)
        self.keyspace: Keyspace | None = None
        self.commit: Commit | None = None
        self.housekeeping: Housekeeping | None = None
        self.wake: Callable[[], None] = _nothing  # re-runs parked requests (the server's)
        self.tasks: list[asyncio.Task[None]] = []
        self.background: set[asyncio.Task[None]] = set()

    async def connect(self) -> None:
        """Read the cluster's slot map (ConnectionError when no seed answers), and refuse
        an address another live front announces (AnnounceTaken)."""
        if not await self.topology.refresh():
            raise ConnectionError(f"no node of the cluster at {self.config.cluster} answered "
                                  f"with a slot map")
        await self.fronts.check_announce()

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
        self.tasks = [loop.create_task(loop_of()) for loop_of in (
            self._renew, self._beat, self._dues, self._scan, self._idle, self._reread)]

    async def close(self) -> None:
        """Shutdown, after the commit path settled: let every lease go (the queues' due
        times noted for whoever takes them next), leave the registry, then the client."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await asyncio.gather(*(self.release(queue, "shutting down")
                               for queue in list(self.held)), return_exceptions=True)
        try:
            await self.fronts.leave()
        except FAILED as exc:
            log.warning("cluster: not out of the fronts' registry (%s); it ages out", exc)
        self.sink.close_links()
        self.topology.close()

    def _in_background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _noted(self, what: str, work: Any) -> None:
        try:
            await work
        except FAILED as exc:
            log.debug("cluster: %s not written (%s)", what, exc)

    # --- owning --------------------------------------------------------------------------
    def serves(self, queue: bytes) -> bool:
        """Whether this front holds `queue` now (a lease past its time is let go here)."""
        lease = self.held.get(queue)
        if lease is None:
            return False
        if lease.valid(time.monotonic()):
            self.used[queue] = time.monotonic()
            return True
        log.warning("cluster: the lease on %r ran out before it was renewed; letting go",
                    queue)
        self.lose(queue)
        return False

    async def adopt(self, queue: bytes, seen: bytes | None) -> bool:
        """Take `queue` if nobody holds it (`seen` None) or an earlier life of this front
        does (`seen`, its owner value): True once it is loaded and served here. False
        while this front is letting it go (the caller looks again)."""
        if queue in self.held:
            return True
        leaving = self.leaving.get(queue)
        if leaving is not None:
            await asyncio.shield(leaving)
            return False
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
            await self.fronts.note(queue, owned=True)
            ops, written = await load(self.topology, queue)
            await self._mirror_loaded(ops)
        except BaseException:
            self.loading.pop(queue, None)
            self._drop(queue)
            self._in_background(self._noted("a lease's release", self.leases.release(lease)))
            raise
        self.loading.pop(queue, None)
        if not lease.valid(time.monotonic()):
            log.warning("cluster: the lease on %r ran out while the queue loaded", queue)
            self._drop(queue)
            return False
        self.held[queue] = lease
        self.terms[queue] = lease.term
        self.used[queue] = time.monotonic()
        self.fronts.placed_at(self.address)
        self.sink.own(queue, lease.value, written)
        if self.housekeeping is not None:
            self.housekeeping.watch(queue)
        self._in_background(self._noted("a due time's removal", self.topology.call(
            slot_of(DUES), (b"ZREM", DUES, queue))))
        log.info("cluster: owning queue %r (term %s)", queue, lease.term[:8].decode())
        return True

    async def _mirror_loaded(self, ops: list[Op]) -> None:
        """A queue's keys as loaded into the store, SLICE ops a turn of the loop: the
        renewals (the loading queue's own among them) and the other queues' requests go
        on meanwhile. Nobody reads the keys before the queue is held: its requests wait
        for the take (`adopt`)."""
        assert self.commit is not None
        for start in range(0, len(ops), SLICE):
            self.commit.mirror(ops[start:start + SLICE])
            await asyncio.sleep(0)

    def lose(self, queue: bytes) -> None:
        """Let `queue` go at once: its unkept writes fail, its keys leave the store
        (unlogged), and its parked clients look again."""
        if self.held.pop(queue, None) is None:
            return
        self.sink.disown(queue)
        self._drop(queue)
        self._in_background(self._noted("an owned queue's removal",
                                        self.fronts.note(queue, owned=False)))
        self.wake()  # its parked clients: forwarded, or take it back

    async def release(self, queue: bytes, why: str) -> None:
        """Let `queue` go cleanly: no request runs it here from now on, its batches on
        their way settle (at most the write timeout), its next due time goes into
        `emq:dues`, its keys leave the store and its lease is deleted; then its parked
        clients look again, and find it where it belongs."""
        lease = self.held.pop(queue, None)
        if lease is None:
            return
        if self.housekeeping is not None:  # its metrics history's open minute, kept with it
            self.housekeeping.close_minutes(queue)
        done = self.leaving[queue] = asyncio.get_running_loop().create_future()
        self.wake()  # its parked requests wait for this, then go where it is
        try:
            try:
                await asyncio.wait_for(self.sink.drained(queue), self.timeout_s)
            except TimeoutError:
                log.warning("cluster: queue %r's writes did not settle before it was let "
                            "go", queue)
            due = self._next_due(queue)
            self.sink.disown(queue)
            self._drop(queue)
            if due is not None:
                await self.topology.call(slot_of(DUES), (b"ZADD", DUES, due, queue))
            await self.leases.release(lease)
            await self.fronts.note(queue, owned=False)
            log.info("cluster: let queue %r go (%s)", queue, why)
        except FAILED as exc:
            log.warning("cluster: queue %r let go, its lease not deleted (%s); it runs out",
                        queue, exc)
        finally:
            self.leaving.pop(queue, None)
            done.set_result(None)
            self.wake()

    def _drop(self, queue: bytes) -> None:
        self.terms.pop(queue, None)
        self.used.pop(queue, None)
        gone = [key for key, _ in self.values_of(queue)]
        assert self.commit is not None
        self.commit.mirror([(b"ZREM", REGISTRY, queue), *([(b"DEL", *gone)] if gone else [])])

    def _next_due(self, queue: bytes) -> int | None:
        """When `queue`'s clock work is next due, from the store (its leases, delayed
        jobs, schedules, rate windows), for whoever takes it next."""
        assert self.keyspace is not None
        keys = queue_keys(queue)
        firsts = []
        for key in (keys.active, keys.scheduled, keys.repeats, keys.rated):
            zset = self.keyspace.zset(key)
            first = zset.first() if zset is not None else None
            if first is not None:
                firsts.append(int(first[0]))
        return min(firsts, default=None)

    def values_of(self, queue: bytes) -> list[tuple[bytes, Any]]:
        """The queue's keys in the store, with their values (what the sink writes back
        where the cluster lost writes: sink.py `_restore`)."""
        assert self.keyspace is not None
        return self.keyspace.with_prefix(PREFIX + queue + b"}:")

    # --- what spans queues ------------------------------------------------------------------
    async def registered(self) -> Any:
        """EMQ.QUEUES in cluster mode: the cluster's registry, in creation order."""
        return await self.topology.call(slot_of(REGISTRY), (b"ZRANGE", REGISTRY, 0, -1))

    async def exists(self, queue: bytes) -> bool:
        """Whether `queue` is in the cluster's registry."""
        return await self.topology.call(slot_of(REGISTRY),
                                        (b"ZSCORE", REGISTRY, queue)) is not None

    def info(self) -> dict[str, object]:
        return {"emqd_cluster": "yes", "emqd_cluster_front": self.address.decode(),
                "emqd_cluster_queues_owned": len(self.held),
                "emqd_cluster_fronts_live": len(self.fronts.live),
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

    async def _beat(self) -> None:
        """The heartbeat; on a change of the live fronts, hand over what another front now
        wins; take over the queues of a dead front that now belong here."""
        live = self.fronts.live
        while True:
            try:
                now_live, dead = await self.fronts.beat(len(self.held))
                if now_live != live:
                    live = now_live
                    log.info("cluster: %d live fronts", len(live))
                    now = time.monotonic()
                    self.shed = {q: at for q, at in self.shed.items() if at > now}
                    for queue in self.fronts.surplus(list(self.held)):
                        self.shed[queue] = now + SHED_S
                        self._in_background(self.release(queue, "handed over"))
                for front in dead:
                    if front != self.address:
                        await self._take_over(front)
            except FAILED as exc:
                log.debug("cluster: no heartbeat: %s", exc)
            await asyncio.sleep(HEARTBEAT_S)

    async def _take_over(self, dead: bytes) -> None:
        """A dead front's queues that belong here are taken (once their leases ran out);
        the last front to empty its set removes it from the registry."""
        owned = await self.fronts.owned_by(dead)
        for queue in owned:
            if queue in self.held or (self.fronts.place(queue) == self.address
                                      and await self.adopt(queue, None)):
                await self.fronts.note(queue, owned=False, front=dead)
        if not owned:
            await self.fronts.forget(dead)
            log.info("cluster: front %s is gone; its queues were taken over", dead.decode())

    async def _dues(self) -> None:
        while True:
            await asyncio.sleep(ADOPT_EVERY_S * (0.5 + random.random()))
            try:
                due: Any = await self.topology.call(slot_of(DUES), (
                    b"ZRANGE", DUES, b"-inf", clock.now_ms(), b"BYSCORE", b"LIMIT", 0,
                    ADOPT_PER_ROUND))
                for queue in due:
                    if self.fronts.place(queue) == self.address:
                        await self.adopt(queue, None)
            except FAILED as exc:
                log.debug("cluster: no look at the due queues: %s", exc)

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(SCAN_EVERY_S * (0.5 + random.random()))
            try:
                await asyncio.wait_for(self._scan_round(), self.lease_s + self.timeout_s)
            except (*FAILED, ValueError) as exc:
                log.debug("cluster: no scan of the registry: %s", exc)

    async def _scan_round(self) -> None:
        """Take the queues of the registry that belong here, nobody owns, and have work
        due: their owner keys, then their due times, read in one pipeline a primary
        (`Topology.scatter`)."""
        names: Any = await self.registered()
        mine = [queue for queue in names if queue not in self.held and queue not in
                self.taking and self.fronts.place(queue) == self.address]
        if not mine:
            return
        owners = await self.topology.scatter(
            [(slot_of(queue), encode_request((b"GET", owner_key(queue)))) for queue in mine],
            self.timeout_s)
        free = [(queue, owner) for queue, owner in zip(mine, owners, strict=True)
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

    async def _idle(self) -> None:
        while True:
            await asyncio.sleep(IDLE_CHECK_S)
            now = time.monotonic()
            for queue in list(self.held):
                if now - self.used.get(queue, now) >= self.idle_s and self._quiet(queue):
                    self._in_background(self.release(queue, "idle"))

    def _quiet(self, queue: bytes) -> bool:
        """No job of `queue` running, nothing on its way to the cluster."""
        assert self.keyspace is not None
        return not self.keyspace.zcard(queue_keys(queue).active) and self.sink.clear(queue)

    async def _reread(self) -> None:
        while True:
            await asyncio.sleep(TOPOLOGY_EVERY_S)
            await self.topology.refresh()


def _due_request(queue: bytes) -> bytes:
    """DUE of a queue (scripts.py): when its clock work is next due, 0 with jobs pending."""
    keys = queue_keys(queue)
    return encode_request((b"EVAL", _DUE, b"6", keys.pending, keys.ring, keys.scheduled,
                           keys.active, keys.repeats, keys.rated))
