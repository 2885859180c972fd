"""Accepting clients on a listening socket, so that none past the limit goes unanswered.

The event loop's own server (loop.create_server) accepts in C, and when
accept() fails for want of a descriptor (EMFILE) libuv closes the client
without a word: the client sees a reset. So emqd accepts itself, at most
ACCEPTS_PER_TURN a loop turn, and hands each connection to the loop
(`connect_accepted_socket`):

- a client over `maxclients` on the plain port is answered Redis's
  `-ERR max number of clients reached` and closed at once, before any
  transport is made for it, so a flood of them costs one descriptor at a time
  (on the TLS port the answer needs the handshake: the connection's own check
  gives it, emqd/wire/protocol.py);
- when accept() fails with EMFILE or ENFILE, the acceptor frees the spare
  descriptor it keeps (/dev/null), accepts, answers the same way, closes, and
  takes the spare back, as Redis's clients would want and libuv's trick does
  not do; a TLS client is closed (nothing can be said to it without a
  handshake). Each is counted in INFO's `rejected_connections`, and the
  shortage is logged, at most once a minute.

emqd/serve/fd_limit.py makes the shortage rare: the descriptors of the log,
compaction and the HTTP side are kept out of the clients' reach.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Final

from emqd import errors
from emqd.core import Core
from emqd.serve.sockets import BoundSocket

log = logging.getLogger("emqd")

ACCEPTS_PER_TURN: Final = 64  # a flood of connections still lets the loop serve the rest
SHORTAGE_LOG_S: Final = 60.0
PAUSE_S: Final = 0.1  # accepting stops this long when not even the spare descriptor is left
REFUSAL: Final = b"-" + errors.MAX_CLIENTS.message + b"\r\n"
_NO_FD: Final = (errno.EMFILE, errno.ENFILE)
_GONE: Final = (errno.ECONNABORTED, errno.EPROTO, errno.EPERM)  # the client left first


class Acceptor:
    """One listening socket's accept loop; `close()` stops it (as a Server's close)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, listener: BoundSocket,
                 factory: Callable[[], asyncio.Protocol], core: Core) -> None:
        self.loop = loop
        self.listener = listener
        self.sock = listener.sock
        self.factory = factory
        self.core = core
        self._spare: int | None = os.open(os.devnull, os.O_RDONLY)
        self._logged_at = -SHORTAGE_LOG_S
        self._closed = False
        loop.add_reader(self.sock.fileno(), self._ready)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    def _ready(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                if exc.errno in _NO_FD:
                    if self._refuse_without_a_descriptor():
                        continue
                    self._pause()  # not even the spare: try again shortly, never spin
                    return
                log.warning("cannot accept a client on %s: %s", self.listener.address, exc)
                return
            if self.listener.ssl is None and len(self.core.clients) >= \
                    self.core.config.maxclients:
                self._refuse(conn)
                continue
            self.loop.create_task(self._connect(conn))

    async def _connect(self, conn: socket.socket) -> None:
        if conn.family != socket.AF_UNIX:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self.loop.connect_accepted_socket(self.factory, conn, ssl=self.listener.ssl)
        except (OSError, ConnectionError) as exc:  # a failed TLS handshake, a client gone
            log.debug("connection on %s dropped before it started: %s",
                      self.listener.address, exc)
            conn.close()

    def _refuse(self, conn: socket.socket) -> None:
        """Answer a client that cannot be served and close it, counted."""
        self.core.stats.rejected_connections += 1
        if self.listener.ssl is None:
            try:
                conn.setblocking(False)
                conn.send(REFUSAL)
            except OSError:
                pass  # it left already
        conn.close()

    def _pause(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.loop.call_later(PAUSE_S, self._resume)

    def _resume(self) -> None:
        if not self._closed:
            if self._spare is None:
                try:
                    self._spare = os.open(os.devnull, os.O_RDONLY)
                except OSError:
                    pass
            self.loop.add_reader(self.sock.fileno(), self._ready)

    def _refuse_without_a_descriptor(self) -> bool:
        """accept() failed for want of a descriptor: use the spare one to answer. False
        when there is no spare to use."""
        now = time.monotonic()
        if now - self._logged_at >= SHORTAGE_LOG_S:
            self._logged_at = now
            log.warning("no file descriptor left to accept a client on %s: refused as over "
                        "maxclients (raise 'ulimit -n', or lower maxclients)",
                        self.listener.address)
        if self._spare is None:
            return False
        os.close(self._spare)
        self._spare = None
        try:
            conn, _ = self.sock.accept()
        except OSError:
            conn = None
        if conn is not None:
            self._refuse(conn)
        try:
            self._spare = os.open(os.devnull, os.O_RDONLY)
        except OSError:  # taken meanwhile: taken back when accepting resumes
            self._spare = None
        return conn is not None
