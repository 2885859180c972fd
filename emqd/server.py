"""Start and stop: build the state, listen, run housekeeping, shut down cleanly.

`run(config)` is what the `emqd` command calls. `Server` owns the listening
socket and the live connections; the shared data lives in `ServerState`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections import deque
from dataclasses import replace
from typing import Final

import uvloop

from emqd import clock, core_build, queue_events
from emqd.blocking import Waiters
from emqd.config import LOG_LEVELS, Config
from emqd.housekeeping import Housekeeping
from emqd.http.app import HttpSide
from emqd.listen import Listener, bind_listeners, close, listen
from emqd.loop_lag import LagProbe
from emqd.output_limit import check
from emqd.persist.aof import open_log
from emqd.persist.load import LoadError
from emqd.server_state import ServerState
from emqd.wire.delivery import Delivery, close_lagging
from emqd.wire.protocol import Connection

log: Final = logging.getLogger("emqd")

MAX_WAKE_ROUNDS: Final = 1000  # a wake round that keeps writing watched keys is cut off
RETRY_WRITE_S: Final = 1.0  # while the disk refuses the log, how often it is tried again
SHUTDOWN_FLUSH_S: Final = 2.0  # how long a shutdown waits for replies to reach their clients
# values (or big-value fields) freed a loop turn after FLUSHALL or DEL
FREE_PER_TURN: Final = 20_000


ID_EPOCH_MS: Final = 1_735_689_600_000  # 2025-01-01 UTC: ids below 2^40 (the score band) until 2059


class Server:
    def __init__(self, config: Config) -> None:
        if config.id_base is None:
            # No log to say where ids stopped: start after this start's time, so that
            # no (id, token) of an earlier process names a new job (PROTOCOL.md 6.1).
            config = replace(config, id_base=0 if config.appendonly
                             else clock.now_ms() - ID_EPOCH_MS)
        self.state = ServerState(config)
        self.waiters = Waiters(self.state.keyspace)
        self.connections: dict[int, Connection] = {}
        self.listeners: list[asyncio.AbstractServer] = []
        self.stopped = asyncio.Event()
        self.stopping = False  # shutdown began: no request runs any more
        self.http: HttpSide | None = None  # the dashboard and /metrics (emqd/http/)
        self.state.shutdown_requested = self.request_shutdown
        self.housekeeping = Housekeeping(self.state, wake=self.wake_parked)
        self.lag_probe = LagProbe(self.state.loop_lag)
        fields = self.state.info_fields
        fields.setdefault("clients", []).append(lambda: {"blocked_clients": len(self.waiters)})
        fields.setdefault("server", []).append(lambda: {"clock_skew_ms": clock.skew_ms()})
        fields.setdefault("stats", []).append(self.state.loop_lag.info)
        # Replies waiting for the log: (connection, data, the log offset they need).
        self.held: deque[tuple[Connection, bytes, int]] = deque()
        self._flush_scheduled = False
        self._free_scheduled = False
        self._retry: asyncio.TimerHandle | None = None
        self.state.pubsub.deliver = Delivery(self)
        self.state.listeners.append(queue_events.publisher(self.state))  # emq:{QUEUE}:events
        self.state.info_fields.setdefault("stats", []).append(
            lambda: {"client_output_buffer_limit_disconnections":
                     self.state.output_limit_disconnections}
        )

    @property
    def config(self) -> Config:
        """The settings of the moment (CONFIG SET replaces them: emqd/server_state.py)."""
        return self.state.config

    # --- the write path: replies leave once the log holds what they answer -------------
    def write(self, conn: Connection, data: bytes, after: int = 0) -> None:
        """Send a connection's replies, once the records they answer are in the log.

        A reply waits for the records of its own connection's writes
        (`Session.log_mark`): under `everysec` and `no` for their write(2), made
        here; under `always` for the fsync at the end of the loop iteration,
        which covers every plan of the iteration, and there every reply of the
        iteration waits for it, reads too, so that none shows a write the file
        does not hold yet. While the disk refuses the log, a reply that depends
        on an unwritten record waits for the retry, and so does everything after
        it on its connection; other connections' reads are served (they may
        show a write whose reply is still held: docs/PERSISTENCE.md).

        `after` is a log offset the data waits for besides its connection's
        own: a queue event's (emqd/queue_events.py), the record of the plan it
        reports, made by another client. Such data never asks for a write(2)
        of its own: if its record is not written yet it leaves with the
        flush at the end of the loop iteration, so that a subscriber costs a
        pipeline of verbs no more system calls than it made without one.
        """
        aof = self.state.aof
        if aof is None:
            self.send(conn, data)
            return
        needed = conn.session.log_mark
        if after > needed:
            needed = after
        if aof.always and aof.failing is None:
            needed = aof.appended
        if needed <= aof.durable and not conn.holding:
            self.send(conn, data)
            return
        if (not after and not aof.always and not conn.holding and aof.failing is None
                and aof.write() and needed <= aof.durable):
            self.send(conn, data)
            return
        conn.holding += 1
        self.held.append((conn, data, needed))
        if conn.session.close_after_reply:  # QUIT: the socket closes right after this write
            self.flush_log()
        else:
            self.schedule_flush()

    def send(self, conn: Connection, data: bytes) -> None:
        """Write to a connection now (what `write` let go, or what needs no log)."""
        if not conn.closed and conn.transport is not None:
            conn.transport.write(data)
            limit = self.state.normal_limit
            if limit is not None and conn.session.pubsub is None:  # Delivery limits those
                unsent = conn.transport.get_write_buffer_size()
                close, conn.over_soft_since_ms = check(limit, unsent, conn.over_soft_since_ms)
                if close:
                    close_lagging(self, conn, unsent, "normal")

    def schedule_flush(self) -> None:
        """Flush the log and release what waits for it at the end of this loop iteration."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush_log)

    def flush_log(self) -> None:
        """The end of a loop iteration (Redis's beforeSleep): write and fsync the log, then
        send the replies it now holds, in order, and go on with the requests of the
        connections that stopped for them. A refusal of the disk is retried a second
        later, and again, until the records are in."""
        self._flush_scheduled = False
        aof = self.state.aof
        durable = -1  # no log: nothing waits for one
        if aof is not None:
            aof.flush()
            durable = aof.durable
        held = self.held
        stuck: set[Connection] = set()
        kept: deque[tuple[Connection, bytes, int]] = deque()
        released: list[Connection] = []
        while held:
            conn, data, needed = held.popleft()
            if (aof is not None and needed > durable) or conn in stuck:
                stuck.add(conn)
                kept.append((conn, data, needed))
                continue
            conn.holding -= 1
            self.send(conn, data)
            if not conn.holding and (conn.pending or conn.streaming is not None):
                released.append(conn)
        self.held = kept
        if aof is not None and aof.failing is not None and self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(RETRY_WRITE_S, self._retry_log)
        for conn in released:
            conn.run_pending()

    def _retry_log(self) -> None:
        self._retry = None
        self.flush_log()

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
        if self.state.keyspace.free(FREE_PER_TURN):
            self.schedule_free()

    def wake_parked(self) -> None:
        """Re-run parked requests whose keys were written, longest-parked first."""
        if not len(self.waiters):
            self.state.keyspace.ready.clear()
            return
        for _ in range(MAX_WAKE_ROUNDS):
            ready = self.waiters.ready_waiters()
            if not ready:
                return
            for conn in ready:
                conn.retry_parked()  # type: ignore[attr-defined]

    # --- life ---------------------------------------------------------------------
    async def start(self, bound: list[Listener]) -> None:
        loop = asyncio.get_running_loop()
        for listener in bound:
            listen(listener)
            server = await loop.create_server(
                lambda: Connection(self), sock=listener.sock, ssl=listener.ssl)
            self.listeners.append(server)
            log.info("emqd listening on %s%s run_id=%s core=%s", listener.address,
                     " (TLS)" if listener.ssl else "", self.state.run_id, core_build())
        if self.config.http_port:
            self.http = HttpSide(self.state, lambda: len(self.waiters), self.wake_parked)
            await self.http.start(self.config.bind, self.config.http_port)
        self.housekeeping.start(loop)
        self.lag_probe.start(loop)
        self.state.keyspace.on_garbage = self.schedule_free
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown)

    def request_shutdown(self) -> None:
        """SIGTERM / SHUTDOWN: stop accepting, answer parked clients, then stop.

        From here no connection runs another request (Connection.data_received,
        run_pending), as Redis runs none after its shutdown begins: the log closes
        soon, and a request run after that would be applied and answered unlogged.
        """
        if self.stopped.is_set():
            return
        self.stopping = True
        for listener in self.listeners:
            listener.close()
        self.housekeeping.stop()
        self.lag_probe.stop()
        for conn in list(self.connections.values()):
            block = conn.parked
            if block is not None:
                conn.answer_parked(block.timeout_reply)
        self.stopped.set()

    async def serve(self) -> None:
        bound = bind_listeners(self.config)  # a busy port is named before the log loads
        try:
            if self.config.appendonly:
                open_log(self.config, self.state, self.schedule_flush)
        except BaseException:
            close(bound)
            raise
        await self.start(bound)
        await self.stopped.wait()
        if self.http is not None:
            await self.http.stop()  # no action may start once the log closes
        self.flush_log()
        if self.state.aof is not None:
            if self.state.aof.close():
                self.flush_log()  # the replies whose records are now in
            else:
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


def run(config: Config) -> int:
    logging.basicConfig(
        level=LOG_LEVELS[config.loglevel],
        format="%(asctime)s emqd %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        uvloop.run(Server(config).serve())
    except (OSError, LoadError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0

