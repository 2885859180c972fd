"""Start and stop: load the store, build the core, listen, run housekeeping, shut down cleanly.

`run(config)` is what the `emqd` command calls. `serve` binds the ports first
(a busy port is named before a long load), opens the sink (the append-only
file is loaded into the keyspace), then builds the `Server`: the `Core` every
command reaches, the `Hub` every connection reaches, housekeeping, the HTTP
side. The `Server` owns the listening sockets and the order of shutdown.

The cluster front and the HTTP side are imported where they are built, only
when the config asks for them: they bring redis-py and aiohttp, a quarter of a
second of every start that needs neither (most starts: the test suite's, a
single process without the dashboard).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Final

import uvloop

from emqd import clock, core_build
from emqd.commit import queue_events
from emqd.commit.sink import NullSink, Sink
from emqd.config import LOG_LEVELS, Config
from emqd.core import Core
from emqd.persist.aof import open_log
from emqd.persist.load import LoadError
from emqd.serve import fd_limit
from emqd.serve.accept import Acceptor
from emqd.serve.housekeeping import Housekeeping
from emqd.serve.loop_lag import LagProbe
from emqd.serve.server_stats import Stats
from emqd.serve.sockets import BoundSocket, bind_http, bind_listeners, close, listen
from emqd.store.keyspace import Keyspace
from emqd.wire.delivery import Delivery
from emqd.wire.protocol import Connection, Hub

if TYPE_CHECKING:
    from emqd.cluster.front import Front
    from emqd.http.app import HttpSide

log: Final = logging.getLogger("emqd")

SHUTDOWN_FLUSH_S: Final = 2.0  # how long a shutdown waits for replies to reach their clients
# values (or big-value fields) freed a loop turn after FLUSHALL or DEL
FREE_PER_TURN: Final = 20_000


ID_EPOCH_MS: Final = 1_735_689_600_000  # 2025-01-01 UTC: ids below 2^40 (the score band) until 2059


def with_id_base(config: Config) -> Config:
    """Where new ids start, when not given. With a log, after the last id the log holds;
    without one, after this start's time, so that no (id, token) of an earlier process
    names a new job (PROTOCOL.md 6.1)."""
    if config.id_base is not None:
        return config
    return replace(config, id_base=0 if config.appendonly else clock.now_ms() - ID_EPOCH_MS)


class Server:
    """One server's parts, wired by plain constructor arguments in the order they need
    each other: the sink (already loaded into `keyspace`), the core, the hub."""

    def __init__(self, config: Config, sink: Sink | None = None,
                 keyspace: Keyspace | None = None, stats: Stats | None = None,
                 front: Front | None = None) -> None:
        config = with_id_base(config)
        self.front = front  # cluster mode's front (emqd/cluster/front.py), else None
        self.connections: dict[int, Connection] = {}
        self.core = Core(config, keyspace, sink if sink is not None else NullSink(), stats,
                         deliver=Delivery(self.connections), shutdown=self.request_shutdown,
                         router=front.router if front is not None else None,
                         epochs=front.terms if front is not None else None)
        self.commit = self.core.commit
        self.hub = Hub(self.core, self.connections)
        self.listeners: list[Acceptor] = []
        self.stopped = asyncio.Event()
        self.http: HttpSide | None = None  # the dashboard and /metrics (emqd/http/)
        self.housekeeping = Housekeeping(self.core, wake=self.hub.wake_parked)
        self.lag_probe = LagProbe(self.core.stats.loop_lag)
        self._free_scheduled = False
        self.commit.listen(queue_events.publisher(self.core.pubsub, self.commit.sink))
        self.commit.listen(self.core.history.listen)
        self.core.add_info("clients", lambda: {"blocked_clients": len(self.hub.waiters)})
        self.core.add_info("server", lambda: {"clock_skew_ms": clock.skew_ms()})

    @property
    def config(self) -> Config:
        """The settings of the moment (CONFIG SET replaces them: emqd/core.py)."""
        return self.core.config

    # --- what FLUSHALL and a big DEL let go of, freed a slice a loop turn ---------------
    def schedule_free(self) -> None:
        """Free a slice of the discarded values at each turn of the loop until none is left
        (Keyspace.free): a FLUSHALL of a million keys costs its deallocations spread
        over turns, between which the other clients are served."""
        if not self._free_scheduled:
            self._free_scheduled = True
            asyncio.get_running_loop().call_soon(self._free_slice)

    def _free_slice(self) -> None:
        self._free_scheduled = False
        if self.core.keyspace.free(FREE_PER_TURN):
            self.schedule_free()

    # --- life ---------------------------------------------------------------------
    async def start(self, bound: list[BoundSocket], http_sock: socket.socket | None) -> None:
        loop = asyncio.get_running_loop()
        hub = self.hub
        for listener in bound:
            listen(listener)
            self.listeners.append(Acceptor(loop, listener, lambda: Connection(hub), self.core))
            log.info("emqd listening on %s%s run_id=%s core=%s", listener.address,
                     " (TLS)" if listener.ssl else "", self.core.run_id, core_build())
        if http_sock is not None:
            from emqd.http.app import HttpSide  # here: see the module docstring
            self.http = HttpSide(self.core, lambda: len(self.hub.waiters), self.hub.wake_parked,
                                 self.front)
            await self.http.start(http_sock)
        self.housekeeping.start(loop)
        self.lag_probe.start(loop)
        self.core.keyspace.on_garbage = self.schedule_free
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown)

    def request_shutdown(self) -> None:
        """SIGTERM / SHUTDOWN: stop accepting, answer parked clients, then stop.

        From here no connection runs another request (Connection.data_received,
        run_pending), as Redis runs none after its shutdown begins: the sink closes
        soon, and a request run after that would be applied and answered unkept.
        """
        if self.stopped.is_set():
            return
        self.hub.stopping = True
        for listener in self.listeners:
            listener.close()
        self.housekeeping.close_minutes()  # kept with the rest, before the sink closes
        self.housekeeping.stop()
        self.lag_probe.stop()
        for conn in list(self.connections.values()):
            block = conn.parked
            if block is not None:
                conn.answer_parked(block.timeout_reply)
        self.stopped.set()

    async def run(self, bound: list[BoundSocket], http_sock: socket.socket | None) -> None:
        """Serve until shutdown, then keep what was applied and let the replies go."""
        await self.start(bound, http_sock)
        await self.stopped.wait()
        if self.http is not None:
            await self.http.stop()  # no action may start once the sink closes
        await self.commit.settle(SHUTDOWN_FLUSH_S)  # a remote sink's acknowledgements
        if not self.commit.close():
            log.error("the log could not be written at shutdown: unacknowledged writes lost")
        for conn in list(self.connections.values()):
            if conn.transport is not None:
                conn.transport.close()  # sends what is buffered, then closes
        # Let the closing transports flush their replies, boundedly.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_FLUSH_S
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.01)
        log.info("emqd stopped")


async def serve(config: Config) -> None:
    """Bind (a busy port, the dashboard's too, is named before the log loads), load,
    build, serve.

    In cluster mode (`--cluster`) the store starts empty and the sink is the
    cluster's (emqd/cluster/): the front takes queues as they are asked for."""
    bound = bind_listeners(config)
    keyspace = Keyspace()
    stats = Stats()
    front: Front | None = None
    http_sock = None
    try:
        http_sock = bind_http(config)
        if config.cluster:
            from emqd.cluster.front import Front  # here: see the module docstring
            front = Front(config)
            await front.connect()
            sink: Sink = front.sink
        elif config.appendonly:
            sink = open_log(config, keyspace, stats.fsyncs.add)
        else:
            sink = NullSink()
        server = Server(config, sink, keyspace, stats, front)
        if front is not None:
            front.start(server.core, server.housekeeping, server.hub.wake_parked)
    except BaseException:
        close(bound)
        if front is not None:
            await front.close()
        if http_sock is not None:
            http_sock.close()
        raise
    try:
        await server.run(bound, http_sock)
    finally:
        if front is not None:
            await front.close()


def run(config: Config) -> int:
    logging.basicConfig(
        level=LOG_LEVELS[config.loglevel],
        format="%(asctime)s emqd %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        config = fd_limit.fit(config)  # room for maxclients, and for the log and HTTP side
        uvloop.run(serve(config))
    except (OSError, LoadError, ValueError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0
