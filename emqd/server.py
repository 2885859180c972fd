"""Start and stop: build the state, listen, run housekeeping, shut down cleanly.

`run(config)` is what the `emqd` command calls. `Server` owns the listening
socket and the live connections; the shared data lives in `ServerState`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys

import uvloop

from emqd.blocking import Waiters
from emqd.config import Config
from emqd.housekeeping import Housekeeping
from emqd.persist.aof import open_log
from emqd.persist.load import LoadError
from emqd.server_state import ServerState
from emqd.wire.protocol import Connection

log = logging.getLogger("emqd")

MAX_WAKE_ROUNDS = 1000  # a wake round that keeps writing watched keys is cut off
SHUTDOWN_FLUSH_S = 2.0  # how long a shutdown waits for replies to reach their clients


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.state = ServerState(config)
        self.waiters = Waiters(self.state.keyspace)
        self.connections: dict[int, Connection] = {}
        self.listeners: list[asyncio.AbstractServer] = []
        self.stopped = asyncio.Event()
        self.state.shutdown_requested = self.request_shutdown
        self.state.wake = self.wake_parked  # housekeeping and verbs outside a connection
        self.housekeeping = Housekeeping(self.state)
        self.state.info_fields.setdefault("clients", []).append(
            lambda: {"blocked_clients": len(self.waiters)}
        )

    # --- the write path ---------------------------------------------------------
    def write(self, conn: Connection, data: bytes) -> None:
        """Send a connection's replies, once the records they answer are in the log."""
        aof = self.state.aof
        if aof is not None and aof.busy and aof.hold(conn, data):
            return  # sent after the fsync (--appendfsync always)
        if not conn.closed and conn.transport is not None:
            conn.transport.write(data)

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
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        sock = _listen_socket(self.config.bind, self.config.port)
        server = await loop.create_server(lambda: Connection(self), sock=sock)
        self.listeners.append(server)
        port = sock.getsockname()[1]
        self.port = port
        log.info("emqd listening on %s:%d run_id=%s", self.config.bind, port, self.state.run_id)
        self.housekeeping.start(loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown)

    def request_shutdown(self) -> None:
        """SIGTERM / SHUTDOWN: stop accepting, answer parked clients, then stop."""
        if self.stopped.is_set():
            return
        for listener in self.listeners:
            listener.close()
        self.housekeeping.stop()
        for conn in list(self.connections.values()):
            block = conn.parked
            if block is not None:
                conn.answer_parked(block.timeout_reply)
        self.stopped.set()

    async def serve(self) -> None:
        if self.config.appendonly:
            open_log(self.config, self.state)
        await self.start()
        await self.stopped.wait()
        if self.state.aof is not None:
            self.state.aof.close()  # written, fsynced, held replies sent
        for conn in list(self.connections.values()):
            if conn.transport is not None:
                conn.transport.close()  # sends what is buffered, then closes
        # Let the closing transports flush their replies, boundedly.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_FLUSH_S
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.01)
        log.info("emqd stopped")


def _listen_socket(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    sock.listen(511)
    sock.setblocking(False)
    return sock


def run(config: Config) -> int:
    logging.basicConfig(
        level={"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}[
            config.loglevel
        ],
        format="%(asctime)s emqd %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        uvloop.run(Server(config).serve())
    except (OSError, LoadError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0

