"""One client's connection to another front, or to a node of the cluster (cluster mode).

A client's requests for a queue another front owns go on a connection of that
client's own (emqd/cluster/router.py), pipelined: each is written when it is
sent (all those sent in one turn of the event loop in one write), one reader
answers them in the order sent, and nothing waits for one reply before the next
request goes. So a pipeline through a front stays a pipeline.

A request sent to a front for a queue (`Sent.queue`) is watched, and so every
wait is bounded without a timer or a task per request: the replies come in
order, so only the oldest request unanswered (the head) is looked at. Once it
has waited `Watch.timeout_s`, the queue's lease is looked at every
`Watch.poll_s`; a lease that moved or ran out (a frozen or cut-off owner's
answer may never come), or the head's own deadline passing, ends the link:
every request on it is then answered as unanswered (it may have run), never
sent again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from emqd.cluster.nodes import CONNECT_S
from emqd.commands.fronts import proof
from emqd.wire.resp import encode_request, reply_end


class Sent:
    """A request written on a link and not answered yet: `future` gets its reply's
    bytes (a ConnectionError, or TimeoutError, when the link ends first). Sent to a
    front for `queue`, under the lease `owner` (None: to the front an unowned queue
    belongs to), its wait ends at `deadline` (loop time; None: while the lease holds)."""

    __slots__ = ("future", "queue", "owner", "deadline", "sent_at")

    def __init__(self, future: asyncio.Future[Any], queue: bytes | None = None,
                 owner: bytes | None = None, deadline: float | None = None) -> None:
        self.future = future
        self.queue = queue
        self.owner = owner
        self.deadline = deadline
        self.sent_at = 0.0

    def answer(self, reply: bytes) -> None:
        if not self.future.done():
            self.future.set_result(reply)

    def fail(self, why: OSError) -> None:
        if not self.future.done():
            self.future.set_exception(why)


class Watch(Protocol):
    """What a link to a front asks about the requests it waits on (the router)."""

    @property
    def timeout_s(self) -> float: ...  # an answer later than this: look at the lease

    @property
    def poll_s(self) -> float: ...  # then look again this often

    async def moved(self, sent: Sent, address: bytes) -> bool:
        """Whether `sent.queue`'s lease moved or ran out since `sent` went to the front
        at `address` (False when the cluster cannot tell: the deadline decides)."""


class Link:
    """A connection for one client's requests to the front (or node) at `address`; a
    front is told that a front forwards to it, and shown the proof that this one knows
    the fronts' password."""

    def __init__(self, address: bytes, resp: int, front: bool = True, user: bytes = b"",
                 watch: Watch | None = None, name: bytes = b"") -> None:
        self.address = address
        # The client's connection name (CLIENT SETNAME), given to the link at the front it
        # reaches: a worker's claims there are held under its name, and the dashboards'
        # Workers pages join it with them (emqd/http/workers.py).
        self.name = name
        self.resp = resp
        self.front = front
        self.user = user
        self.watch = watch
        self.loop = asyncio.get_running_loop()
        self.writer: asyncio.StreamWriter | None = None
        self.reading: asyncio.Task[None] | None = None
        self.waiting: deque[Sent] = deque()  # written, in order
        self.outbox: list[bytes] = []  # sent in this turn of the loop, not written yet
        self.timer: asyncio.TimerHandle | None = None  # the head's next look
        self.looking: asyncio.Task[None] | None = None  # a look at the head's lease
        self.lock = asyncio.Lock()  # one connection attempt at a time

    @property
    def connected(self) -> bool:
        return self.writer is not None

    async def connect(self, password: str | None) -> None:
        """Connect (and introduce this link) unless connected; nothing of a client's is
        sent yet, so a failure here may be retried elsewhere. A front is shown the proof
        that this one knows the fronts' `password` (EMQ.FRONT's challenge), never the
        password; a node of the cluster is sent its own (`password` is the node's then,
        with its user)."""
        async with self.lock:
            if self.writer is not None:
                return
            host, _, port = self.address.decode().rpartition(":")
            try:
                reader, self.writer = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port)), CONNECT_S)
                self.reading = self.loop.create_task(self._read(reader))
                if self.front:
                    if password:
                        nonce = _bulk_of(await self._introduce([b"EMQ.FRONT", b"CHALLENGE"]))
                        await self._introduce([b"EMQ.FRONT", self.address, b"PROOF",
                                               proof(password, nonce, self.address)])
                    else:
                        await self._introduce([b"EMQ.FRONT", self.address])
                    if self.name:
                        await self._introduce([b"CLIENT", b"SETNAME", self.name])
                elif password:
                    await self._introduce([b"AUTH", *([self.user] if self.user else []),
                                           password.encode()])
                if self.resp == 3:
                    await self._introduce([b"HELLO", b"3"])
            except BaseException:
                self.close()
                raise

    async def _introduce(self, argv: list[bytes]) -> bytes:
        reply = await asyncio.wait_for(self.request(argv), CONNECT_S)
        if reply.startswith(b"-"):
            raise ConnectionError(f"{self.address!r} refused {argv[0]!r}: {reply!r}")
        return reply

    def request(self, argv: list[bytes]) -> asyncio.Future[bytes]:
        """Send `argv`, unwatched (its waiter bounds its wait); the future of its reply."""
        future: asyncio.Future[bytes] = self.loop.create_future()
        self.send(argv, Sent(future))
        return future

    def send(self, argv: list[bytes], sent: Sent) -> None:
        """Send `argv` (written before the loop's next turn); `sent` is answered (watched
        when it names a queue)."""
        assert self.writer is not None
        sent.sent_at = self.loop.time()
        self.waiting.append(sent)
        if not self.outbox:
            self.loop.call_soon(self._flush)
        self.outbox.append(encode_request(argv))
        if self.timer is None and self.watch is not None:
            self._arm(sent.sent_at + self.watch.timeout_s)

    def _flush(self) -> None:
        if self.writer is not None and self.outbox:
            self.writer.write(b"".join(self.outbox))
        self.outbox.clear()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        buffer = bytearray()
        waiting = self.waiting
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError(f"{self.address!r} closed the connection")
                buffer += data
                at = 0
                while (end := reply_end(buffer, at)) is not None:
                    reply = bytes(buffer[at:end])
                    at = end
                    if waiting:
                        waiting.popleft().answer(reply)
                del buffer[:at]
        except (OSError, ValueError) as exc:
            self._end(exc if isinstance(exc, OSError) else ConnectionError(str(exc)))

    # --- the head's watch --------------------------------------------------------------
    def _arm(self, at: float) -> None:
        self.timer = self.loop.call_at(at, self._check)

    def _check(self) -> None:
        """The head's time: end the link past its deadline, look at its lease once it
        waited the timeout, or come back when it will have (a newer head's time)."""
        self.timer = None
        watch = self.watch
        if not self.waiting or watch is None or self.looking is not None:
            return
        head = self.waiting[0]
        now = self.loop.time()
        if head.deadline is not None and now >= head.deadline:
            self._end(TimeoutError("no answer within the forwarding bound"))
        elif head.queue is None:
            self._arm(now + watch.timeout_s)  # an introduction: its own wait is bounded
        elif now < head.sent_at + watch.timeout_s:
            self._arm(head.sent_at + watch.timeout_s)
        else:
            self.looking = self.loop.create_task(self._look(head, watch))

    async def _look(self, head: Sent, watch: Watch) -> None:
        try:
            moved = await watch.moved(head, self.address)
        finally:
            self.looking = None
        if not self.waiting or self.waiting[0] is not head:
            self._check()  # answered meanwhile: the new head's time
        elif moved:
            self._end(TimeoutError(f"the lease on {head.queue!r} moved or ran out"))
        else:
            at = self.loop.time() + watch.poll_s
            self._arm(at if head.deadline is None else min(at, head.deadline))

    # --- the end ---------------------------------------------------------------------
    def _end(self, why: OSError) -> None:
        """Close the connection; every request on it fails with `why`."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()
        for task in (self.reading, self.looking):
            if task is not None:
                task.cancel()
        self.reading = self.looking = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.outbox.clear()
        waiting = list(self.waiting)
        self.waiting.clear()
        for sent in waiting:
            sent.fail(why)

    def close(self) -> None:
        self._end(ConnectionError(f"the link to {self.address!r} was closed"))


def _bulk_of(reply: bytes) -> bytes:
    """The string of a bulk reply (`$5\r\nvalue\r\n`)."""
    return reply[reply.index(b"\r\n") + 2:-2]
