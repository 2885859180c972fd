"""One client connection on asyncio: framing, pipelining, parking, flow control.

Each `data_received` parses every complete request, runs them in order through
the dispatcher and answers them with one write. Broken framing arrives as a
`ProtocolError` after the requests before it: those are answered, then the
error, then the connection closes, as in Redis. A client that still owes its
password gets its requests one at a time (the parser's `backlog`), because
the AUTH among them changes the limits for the next ones. A request that parks (a
blocking CLAIM) stops the pipeline: the requests behind it wait, as they do
behind Redis's BLPOP, and run when it is answered. When the socket's write
buffer passes its high-water mark the connection stops reading and stops
running requests, so a client that pipelines without reading cannot grow the
server's memory without bound: within one batch too, whose replies go to the
socket every FLUSH_BYTES, and whose requests stop there when the socket did not
take them all (or the log holds them back), to go on once it drains. A big
reply (a `reply.Stream`) is written the same way, a chunk at a time, made only
while the socket's buffer is under its high-water mark: the requests behind it
wait for its last chunk, and other clients are served in between.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, cast

from emqd import clock, errors
from emqd.dispatch import execute
from emqd.errors import ProtocolError
from emqd.plan import Block
from emqd.reply import Stream
from emqd.session import Session
from emqd.wire.resp import RequestParser, encode, stream_chunks

if TYPE_CHECKING:
    from emqd.server import Server

log: Final = logging.getLogger("emqd")

MAX_QUEUED_REQUESTS: Final = 10_000  # parsed but not yet run (behind a park or a full socket)
# A batch's replies go out every this many bytes, and the batch stops there when
# they back up: 2,000 HGETALLs of a 220 kB hash in one read cost a client that
# does not read about one chunk and one reply, not 440 MB.
FLUSH_BYTES: Final = 64 * 1024
# A big reply yields the loop after this many chunks (of reply.STREAM_ITEMS items,
# ~100 KiB each) even to a client that reads as fast as it is written.
STREAM_TURN: Final = 32


class Connection(asyncio.Protocol):
    __slots__ = (
        "server",
        "session",
        "parser",
        "transport",
        "pending",
        "parked",
        "park_timer",
        "wake_timer",
        "paused",
        "closed",
        "holding",
        "over_soft_since_ms",
        "streaming",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        self.parser = RequestParser()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[list[bytes]] = deque()  # requests waiting to run
        self.parked: Block | None = None  # the Block of the request at the head
        self.park_timer: asyncio.TimerHandle | None = None
        self.wake_timer: asyncio.TimerHandle | None = None  # Block.wake_at_ms
        self.paused = False  # the socket's write buffer is full
        self.closed = False
        self.holding = 0  # replies the server holds for the log (Server.write)
        self.over_soft_since_ms = 0  # client-output-buffer-limit normal's soft clock
        self.streaming: Iterator[bytes] | None = None  # the chunks left of a big reply

    # --- asyncio callbacks -----------------------------------------------------
    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # a stream server's: it can write
        self.transport = transport
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("sockname")
        state = self.server.state
        self.session = Session(state, _addr(peer), _addr(sock))
        self.session.created_ms = self.session.last_ms = clock.now_ms()
        if len(state.clients) >= state.config.maxclients:
            state.rejected_connections += 1
            transport.write(b"-" + errors.MAX_CLIENTS.message + b"\r\n")
            transport.close()
            self.closed = True
            return
        state.clients[self.session.id] = self.session
        state.total_connections += 1
        self.server.connections[self.session.id] = self

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.state.clients.pop(self.session.id, None)
        self.server.connections.pop(self.session.id, None)
        self.server.state.pubsub.leave(self.session)
        self._unpark()
        self.pending.clear()
        self.streaming = None

    def pause_writing(self) -> None:
        self.paused = True
        self.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        self.paused = False
        if not self.closed:
            self.transport.resume_reading()  # type: ignore[union-attr]
            self.run_pending()

    def data_received(self, data: bytes) -> None:
        if self.server.stopping:
            return  # shutdown began: what arrives now is never run (Server.request_shutdown)
        self.session.last_ms = clock.hold()  # the batch's commands run at this time
        try:
            self._accept(self.parser.feed(data, self.session.authenticated))
        finally:
            clock.release()

    def _accept(self, requests: list[Any]) -> None:
        """Run (or queue) parsed requests, then any the parser still holds back."""
        while True:
            if requests:
                if (self.pending or self.parked is not None or self.paused
                        or self.streaming is not None):
                    self.pending.extend(requests)
                    if len(self.pending) > MAX_QUEUED_REQUESTS:
                        self.transport.pause_reading()  # type: ignore[union-attr]
                    return
                self._run(requests)
                self.server.wake_parked()
            if self.closed or not self.parser.backlog:
                return
            requests = self.parser.feed(b"", self.session.authenticated)

    # --- running requests ---------------------------------------------------------
    def _run(self, requests: list[Any]) -> None:
        """Run requests in order; stop at a park, a QUIT, or replies backing up.

        The parser stops at broken framing, so only the last request can be a
        `ProtocolError`: it is set aside once per batch and answered after the
        others, instead of being looked for before every request.
        """
        session = self.session
        out: list[bytes] = []
        size = 0
        broken = requests[-1] if type(requests[-1]) is ProtocolError else None
        for i, argv in enumerate(requests[:-1] if broken is not None else requests):
            reply = execute(session, argv)
            if type(reply) is Block:
                self._defer(requests[i + 1 :])
                self._write(out)
                self._park(argv, reply)
                return
            if type(reply) is Stream and session.pubsub is None:  # (a subscriber's: whole)
                self._write(out)
                out, size = [], 0
                if not self._start_stream(reply):
                    self._defer(requests[i + 1 :])
                    return
                continue
            # session.resp read after the command: a HELLO's reply is in the new protocol
            data = encode(reply, session.resp)
            out.append(data)
            if session.close_after_reply:
                self._write(out)
                self.transport.close()  # type: ignore[union-attr]
                self.closed = True
                return
            size += len(data)
            if size >= FLUSH_BYTES:
                self._write(out)
                out, size = [], 0
                if self.paused or self.holding or self.closed:
                    # the socket or the log holds replies back: the rest waits for
                    # resume_writing or Server.flush_log (the ProtocolError too)
                    self._defer(requests[i + 1 :])
                    return
        if broken is not None:
            out.append(b"-ERR " + str(broken).encode("latin-1") + b"\r\n")
            self._write(out)
            self.transport.close()  # type: ignore[union-attr]
            self.closed = True
            return
        self._write(out)

    def _defer(self, rest: list[Any]) -> None:
        """The batch stopped: its other requests wait at the head of `pending`, in order
        (unless the connection closed, when nothing more runs)."""
        if not self.closed:
            self.pending.extendleft(reversed(rest))

    def run_pending(self) -> None:
        """Go on with a big reply and run queued requests, after an unpark or when the
        socket drained or the log released the replies it held."""
        if self.closed or self.paused or self.parked is not None:
            return
        if self.streaming is not None and not self._stream():
            return
        if not self.pending or self.server.stopping:
            return
        requests = list(self.pending)
        self.pending.clear()
        self._run(requests)
        if not self.pending and self.transport is not None and not self.closed:
            self.transport.resume_reading()
        self.server.wake_parked()
        if not self.pending and self.parser.backlog:
            self._accept([])

    def _write(self, out: list[bytes]) -> None:
        if out:
            self.server.write(self, b"".join(out) if len(out) > 1 else out[0])

    # --- big replies, a chunk at a time -----------------------------------------------
    def _start_stream(self, stream: Stream) -> bool:
        """Write a big reply's first chunk as any reply (it may wait for the log), then
        the rest. True when all of it is written; False when the socket or the log
        held a chunk back: the rest is made and written when they let it go."""
        chunks = stream_chunks(stream, self.session.resp)
        self.server.write(self, next(chunks))
        self.streaming = chunks
        if self.paused or self.holding or self.closed:
            return False
        return self._stream()

    def _stream(self) -> bool:
        """Write the big reply's next chunks until the last (True), or until the socket
        holds them back or STREAM_TURN chunks were written in this turn of the loop
        (False: the loop serves others, then `run_pending` goes on). The chunks need
        no wait for the log: the first one waited for every record the reply shows."""
        chunks = self.streaming
        if chunks is None:
            return True
        if self.holding:
            return False  # flush_log calls run_pending once it let the held replies go
        send = self.server.send
        for turn, chunk in enumerate(chunks, 1):
            send(self, chunk)
            if self.paused or self.closed:
                return False  # resume_writing goes on
            if turn == STREAM_TURN:
                asyncio.get_running_loop().call_soon(self.run_pending)
                return False
        self.streaming = None
        return True

    # --- parking (blocking commands) ---------------------------------------------
    def _park(self, argv: list[bytes], block: Block) -> None:
        self.parked = block
        self.pending.appendleft(argv)  # re-run at the head when woken
        self.server.waiters.park(self, block.keys)
        if block.timeout_ms > 0:
            loop = asyncio.get_running_loop()
            self.park_timer = loop.call_later(block.timeout_ms / 1000.0, self._park_timeout)
        self._arm_wake(block.wake_at_ms)

    def _arm_wake(self, at_ms: int | None) -> None:
        """Run the parked request again at `at_ms` (a rate limit's window frees then)."""
        if self.wake_timer is not None:
            self.wake_timer.cancel()
            self.wake_timer = None
        if at_ms is not None:
            delay_ms = max(at_ms - clock.now_ms(), 0)
            self.wake_timer = asyncio.get_running_loop().call_later(delay_ms / 1000.0,
                                                                     self._park_wake)

    def _park_wake(self) -> None:
        self.wake_timer = None
        self.retry_parked()
        self.server.wake_parked()  # its plan may have written what others wait for

    def _park_timeout(self) -> None:
        block = self.parked
        if block is None or self.closed:
            return
        self._unpark()
        self.pending.popleft()
        self._write([encode(block.timeout_reply, self.session.resp)])
        self.run_pending()

    def retry_parked(self) -> bool:
        """Run the parked request again (a watched key was written). True when answered."""
        if self.parked is None or self.closed:
            return True
        argv = self.pending[0]
        reply = execute(self.session, argv)
        if type(reply) is Block:
            self._arm_wake(reply.wake_at_ms)
            return False
        self._unpark()
        self.pending.popleft()
        self._write([encode(reply, self.session.resp)])
        self.run_pending()
        return True

    def answer_parked(self, reply: Any) -> None:
        """Answer a parked request without running it (shutdown)."""
        if self.parked is None or self.closed:
            return
        self._unpark()
        self.pending.popleft()
        self._write([encode(reply, self.session.resp)])

    def _unpark(self) -> None:
        if self.parked is not None:
            self.server.waiters.unpark(self)
            self.parked = None
        if self.park_timer is not None:
            self.park_timer.cancel()
            self.park_timer = None
        if self.wake_timer is not None:
            self.wake_timer.cancel()
            self.wake_timer = None


def _addr(info: Any) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = info[0]
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "")
