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
from typing import Any, Final, cast

from emqd import clock, errors
from emqd.commit.path import Outlet
from emqd.commit.plan import AGAIN, Block, Later
from emqd.core import Core, Session
from emqd.dispatch import execute
from emqd.errors import ProtocolError
from emqd.reply import Stream
from emqd.sessions.blocking import Waiters
from emqd.wire.output_limit import check
from emqd.wire.resp import RequestParser, encode, stream_chunks

log: Final = logging.getLogger("emqd")

MAX_WAKE_ROUNDS: Final = 1000  # a wake round that keeps writing watched keys is cut off
_UNACKNOWLEDGED: Final = b"-" + errors.UNACKNOWLEDGED.message + b"\r\n"

MAX_QUEUED_REQUESTS: Final = 10_000  # parsed but not yet run (behind a park or a full socket)
# A chunk read from the socket (up to 256 KiB) is parsed and run this much at a time,
# as if it had come in smaller reads: a pipeline's parsed arguments (a bytes object
# each) are garbage once run, and parsing a whole chunk first held about 600 ZADDs of
# 16 members at once, ~1.6 MB of small objects whose pymalloc pools then stayed
# between the values kept (10,000 such sets: 624 bytes of RSS a set, 505 when sent 20
# at a time). Redis reads a request and runs it before reading the next.
FEED_BYTES: Final = 16 * 1024
# A batch's replies go out every this many bytes, and the batch stops there when
# they back up: 2,000 HGETALLs of a 220 kB hash in one read cost a client that
# does not read about one chunk and one reply, not 440 MB.
FLUSH_BYTES: Final = 64 * 1024
# A big reply yields the loop after this many chunks (of reply.STREAM_ITEMS items,
# ~100 KiB each) even to a client that reads as fast as it is written.
STREAM_TURN: Final = 32


class Hub:
    """What the connections of one server share, and nothing more: the narrow way in.

    A connection reaches the rest of the server through its hub: the `Core` its
    session runs commands against, the commit path its output leaves through
    (`commit`), the parked clients (`waiters`), the registry of live connections
    (which Pub/Sub delivery and shutdown walk), and whether shutdown began. The
    server (emqd/serve/lifecycle.py) builds one and hands it to every connection; the wire
    never imports the server.
    """

    def __init__(self, core: Core, connections: dict[int, Connection]) -> None:
        self.core = core
        self.commit = core.commit
        self.waiters: Waiters[Connection] = Waiters(core.keyspace)
        self.connections = connections  # session id -> its live connection
        self.stopping = False  # shutdown began: no request runs any more

    def wake_parked(self) -> None:
        """Re-run parked requests whose keys were written, longest-parked first."""
        if not len(self.waiters):
            self.core.keyspace.ready.clear()
            return
        for _ in range(MAX_WAKE_ROUNDS):
            ready = self.waiters.ready_waiters()
            if not ready:
                return
            for conn in ready:
                conn.retry_parked()


class Connection(asyncio.Protocol, Outlet):
    __slots__ = (
        "hub",
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
        "close_when_released",
        "awaiting",
    )

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.parser = RequestParser()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[list[bytes]] = deque()  # requests waiting to run
        self.parked: Block | None = None  # the Block of the request at the head
        self.park_timer: asyncio.TimerHandle | None = None
        self.wake_timer: asyncio.TimerHandle | None = None  # Block.wake_at_ms
        self.paused = False  # the socket's write buffer is full
        self.closed = False
        self.holding = 0  # outputs the commit path holds for the sink (emqd/commit/path.py)
        self.over_soft_since_ms = 0  # client-output-buffer-limit normal's soft clock
        self.streaming: Iterator[bytes] | None = None  # the chunks left of a big reply
        self.close_when_released = False  # QUIT's reply is held: close once it left
        # Replies given later (a router's `Later`: another process's), in the order of
        # their requests: the head's request may wait at the head of `pending` (AGAIN:
        # run it here), those behind it were sent on already (`Later.sent`) and only
        # their replies wait.
        self.awaiting: deque[Later] = deque()

    # --- asyncio callbacks -----------------------------------------------------
    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # a stream server's: it can write
        self.transport = transport
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("sockname")
        core = self.hub.core
        self.session = Session(core, _addr(peer), _addr(sock))
        self.session.created_ms = self.session.last_ms = clock.now_ms()
        if len(core.clients) >= core.config.maxclients:
            core.stats.rejected_connections += 1
            transport.write(b"-" + errors.MAX_CLIENTS.message + b"\r\n")
            transport.close()
            self.closed = True
            return
        core.clients[self.session.id] = self.session
        core.stats.total_connections += 1
        self.hub.connections[self.session.id] = self

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        core = self.hub.core
        core.clients.pop(self.session.id, None)
        self.hub.connections.pop(self.session.id, None)
        core.pubsub.leave(self.session)
        if core.router is not None:
            core.router.forget(self.session)
        self._unpark()
        self.awaiting.clear()
        self.pending.clear()
        self.streaming = None

    def _transport(self) -> asyncio.Transport:
        """The socket's transport, which connection_made set before anything here runs."""
        transport = self.transport
        assert transport is not None
        return transport

    def pause_writing(self) -> None:
        self.paused = True
        self._transport().pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if not self.closed:
            self._transport().resume_reading()
            self.run_pending()

    def data_received(self, data: bytes) -> None:
        if self.hub.stopping:
            return  # shutdown began: what arrives now is never run (Server.request_shutdown)
        self.session.last_ms = clock.hold()  # the batch's commands run at this time
        try:
            if len(data) <= FEED_BYTES:
                self._accept(self.parser.feed(data, self.session.authenticated))
                return
            for at in range(0, len(data), FEED_BYTES):
                if self.closed:
                    return  # QUIT, or a protocol error, ended it: the rest is never read
                self._accept(self.parser.feed(data[at:at + FEED_BYTES],
                                              self.session.authenticated))
        finally:
            clock.release()

    def _accept(self, requests: list[Any]) -> None:
        """Run (or queue) parsed requests, then any the parser still holds back."""
        while True:
            if requests:
                if (self.pending or self.parked is not None or self.paused
                        or self.streaming is not None or self.awaiting):
                    self.pending.extend(requests)
                    if len(self.pending) > MAX_QUEUED_REQUESTS:
                        self._transport().pause_reading()
                    return
                self._run(requests)
                self.hub.wake_parked()
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
        fallible = self.hub.commit.fallible
        for i, argv in enumerate(requests[:-1] if broken is not None else requests):
            session.tells = 0
            reply = execute(session, argv)
            if self.awaiting and isinstance(reply, errors.ReplyError):
                # refused before it could be sent on (out of memory, say): its reply
                # waits in line behind the replies of the requests sent on before it
                reply = Later(_resolved(reply), sent=True)
            if type(reply) is Block:
                self._defer(requests[i + 1 :])
                self._write(out)
                self._park(argv, reply)
                return
            if type(reply) is Later:
                later: Later = reply
                self._write(out)
                out, size = [], 0
                if not later.sent:
                    self._defer(requests[i:])  # the request stays at the head until answered
                    self._await(later)
                    return
                # Sent on already (its queue's owner known): the next request goes too if
                # it is sent on the same way, so that a pipeline through this front stays
                # one; anything else waits until every reply sent for came back.
                self._await(later)
                rest = requests[i + 1:] if broken is None else requests[i + 1:-1]
                router = self.hub.core.router
                if rest and router is not None and router.forwards(session, rest[0]):
                    continue
                self._defer(requests[i + 1:])
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
            if fallible and session.tells > self.hub.commit.sink.durable:
                # A reply that tells of a record a sink may still lose: on its own, so that
                # a lost record is answered with a retryable error instead
                # (emqd/commit/path.py, the rule).
                self._write(out)
                out, size = [], 0
                self._reply(data)
                if session.close_after_reply:
                    self._close_after_output()
                    return
                continue
            out.append(data)
            if session.close_after_reply:
                self._write(out)
                self._close_after_output()
                return
            size += len(data)
            if size >= FLUSH_BYTES:
                self._write(out)
                out, size = [], 0
                if self.paused or self.holding or self.closed:
                    # the socket or the sink holds replies back: the rest waits for
                    # resume_writing or the commit path's release (the ProtocolError too)
                    self._defer(requests[i + 1 :])
                    return
        if broken is not None:
            out.append(b"-ERR " + str(broken).encode("latin-1") + b"\r\n")
            self._write(out)
            self._transport().close()
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
        socket drained or the commit path released the replies it held."""
        if self.closed or self.paused or self.parked is not None or self.awaiting:
            return
        if self.streaming is not None and not self._stream():
            return
        if not self.pending or self.hub.stopping:
            return
        requests = list(self.pending)
        self.pending.clear()
        self._run(requests)
        if not self.pending and self.transport is not None and not self.closed:
            self.transport.resume_reading()
        self.hub.wake_parked()
        if not self.pending and self.parser.backlog:
            self._accept([])

    # --- output, through the commit path --------------------------------------------
    def _write(self, out: list[bytes], after: int = 0) -> None:
        """Replies, once the sink holds this client's own writes and `after` (an offset
        of others' writes they tell of) durably."""
        if out:
            self.send(b"".join(out) if len(out) > 1 else out[0], after)

    def send(self, data: bytes, after: int = 0, eager: bool = True, own: int = 0,
             instead: bytes | None = None) -> None:
        """Through the commit path (emqd/commit/path.py `send`): the data waits for this
        client's last write (`Session.log_mark`) and for `after`; `own` and `instead`
        as there (what a fallible sink's lost record turns it into)."""
        needed = self.session.log_mark
        if after > needed:
            needed = after
        commit = self.hub.commit
        commit.send(self, data, needed, eager, own, instead)
        if self.holding and self.session.close_after_reply:
            commit.flush()  # QUIT: the socket closes right after this write

    def _reply(self, data: bytes) -> None:
        """A reply that tells of `session.tells` (its own write, or, as the router set it,
        its queue's writes so far): it waits for that record, and a retryable error goes
        in its place if the sink lost it (emqd/commit/path.py, the rule)."""
        tells = self.session.tells
        self.send(data, tells, own=tells, instead=_UNACKNOWLEDGED)

    def deliver(self, data: bytes) -> None:
        """The commit path lets `data` go: onto the socket, then the normal clients'
        output limit (a subscriber's is Pub/Sub delivery's: emqd/wire/delivery.py)."""
        transport = self.transport
        # (after QUIT, `closed` stops the requests; its held reply still goes out)
        if (not self.closed or self.close_when_released) and transport is not None:
            transport.write(data)
            limit = self.hub.core.normal_limit
            if limit is not None and self.session.pubsub is None:
                unsent = transport.get_write_buffer_size()
                close, self.over_soft_since_ms = check(limit, unsent, self.over_soft_since_ms)
                if close:
                    close_lagging(self, unsent, "normal")

    def released(self) -> None:
        """Every held output left: go on with what stopped for them (or close, after QUIT)."""
        if self.close_when_released:
            self._close()
        elif self.pending or self.streaming is not None:
            self.run_pending()

    def _close_after_output(self) -> None:
        """QUIT: close once the reply left (`send` flushed a held one at once); one that
        still waits (a remote sink) closes the socket when released."""
        if self.holding:
            self.close_when_released = True
            self.closed = True  # nothing more runs or is read
            self._transport().pause_reading()
            return
        self._close()

    def _close(self) -> None:
        self.close_when_released = False
        self._transport().close()
        self.closed = True

    # --- big replies, a chunk at a time -----------------------------------------------
    def _start_stream(self, stream: Stream) -> bool:
        """Write a big reply's first chunk as any reply (it may wait for the log), then
        the rest. True when all of it is written; False when the socket or the log
        held a chunk back: the rest is made and written when they let it go."""
        chunks = stream_chunks(stream, self.session.resp)
        self.send(next(chunks))
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
            return False  # the commit path calls run_pending once it let the held replies go
        deliver = self.deliver
        for turn, chunk in enumerate(chunks, 1):
            deliver(chunk)
            if self.paused or self.closed:
                return False  # resume_writing goes on
            if turn == STREAM_TURN:
                asyncio.get_running_loop().call_soon(self.run_pending)
                return False
        self.streaming = None
        return True

    # --- replies given later (a router's `Later`) ------------------------------------
    def _await(self, later: Later) -> None:
        """Stop this client's requests until `later`'s reply comes (and those of the ones
        sent on before it), then write them in order and go on."""
        self.awaiting.append(later)
        later.future.add_done_callback(self._later_done)

    def _later_done(self, future: Any) -> None:
        """A reply came: write the replies that came, from the oldest, in order (a request
        not sent on leaves the head of `pending`), or, on AGAIN, run the request again
        here; then, when none is awaited any more, go on with the ones behind them."""
        awaiting = self.awaiting
        if self.closed:
            awaiting.clear()
            return
        if not awaiting or not awaiting[0].future.done():
            return  # (the replies that came were written with an earlier one's)
        again = False
        out: list[bytes] = []
        resp = self.session.resp
        while awaiting and awaiting[0].future.done():
            later = awaiting.popleft()
            done = later.future
            error = done.exception() if not done.cancelled() else errors.UNACKNOWLEDGED()
            reply = done.result() if error is None else (
                error if isinstance(error, errors.ReplyError) else errors.UNACKNOWLEDGED())
            if reply is AGAIN:
                again = True  # (only a request not sent on: it is alone, at the head)
                continue
            if not later.sent:
                self.pending.popleft()
            out.append(encode(reply, resp))
        self._write(out)
        if awaiting and not again:
            return
        self.run_pending()
        self.hub.wake_parked()

    # --- parking (blocking commands) ---------------------------------------------
    def _park(self, argv: list[bytes], block: Block) -> None:
        self.parked = block
        self.pending.appendleft(argv)  # re-run at the head when woken
        self.hub.waiters.park(self, block.keys)
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
        self.hub.wake_parked()  # its plan may have written what others wait for

    def _park_timeout(self) -> None:
        block = self.parked
        if block is None or self.closed:
            return
        self._unpark()
        self.pending.popleft()
        self._write([encode(block.timeout_reply, self.session.resp)])
        self.run_pending()

    def retry_parked(self) -> bool:
        """Run the parked request again (a watched key was written). True when answered.

        Its answer tells of what another client wrote (an EMQ.WAIT woken by a
        COMPLETE, a CLAIM woken by an ADD), so it waits for every record appended
        so far, not only for this client's own (a router may narrow that to the
        newest record of its queue), and goes like any reply that tells
        of a record: a retryable error in its place if that record is lost."""
        if self.parked is None or self.closed:
            return True
        argv = self.pending[0]
        self.session.tells = self.hub.commit.sink.appended
        self.session.waking = True
        try:
            reply = execute(self.session, argv)
        finally:
            self.session.waking = False
        if type(reply) is Block:
            self._arm_wake(reply.wake_at_ms)
            return False
        if type(reply) is Later:  # the router sends it elsewhere now (its queue left)
            self._unpark()
            if reply.sent:
                self.pending.popleft()  # sent on: only its reply is awaited
            self._await(reply)
            return True
        self._unpark()
        self.pending.popleft()
        self._reply(encode(reply, self.session.resp))
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
            self.hub.waiters.unpark(self)
            self.parked = None
        if self.park_timer is not None:
            self.park_timer.cancel()
            self.park_timer = None
        if self.wake_timer is not None:
            self.wake_timer.cancel()
            self.wake_timer = None


def _resolved(value: Any) -> asyncio.Future[Any]:
    """A future that has its result already."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def _addr(info: Any) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = info[0]
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "")


def close_lagging(conn: Connection, unsent: int, kind: str) -> None:
    """Drop a client whose unsent output passed its class's limit (what is unsent is lost).

    The one way a client is closed for its output limit, for any class of client:
    logged as Redis logs it, counted for INFO's
    `client_output_buffer_limit_disconnections`.
    """
    conn.hub.core.stats.output_limit_disconnections += 1
    session = conn.session
    log.warning(
        "Client id=%d addr=%s name=%s closed for overcoming of output buffer limits "
        "(%s, %d bytes unsent)",
        session.id, session.addr, session.name.decode("latin-1"), kind, unsent,
    )
    conn.closed = True  # nothing more is written to it; connection_lost cleans up
    conn._transport().abort()
