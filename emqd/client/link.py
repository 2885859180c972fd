"""The Worker's way to the server: two connections, whatever the concurrency.

- The **claim** connection carries only EMQ.CLAIM ... COUNT n BLOCK ms: a parked
  claim holds its connection (commands pipelined behind it would wait for it,
  protocol section 5), so nothing else shares it.
- The **command** connection carries everything else (COMPLETE, FAIL, REQUEUE,
  EXTEND, and the handlers' PROGRESS, LOG, CHILDREN) pipelined: every verb asked
  for during one turn of the event loop goes out in one write at the end of that
  turn (`Batcher`), and its replies come back in order.

Each verb is the queue's own `Operation` (emqd/client/commands.py), so the Worker
sends exactly the bytes a `Queue` sends and reads replies by the same rules; the
methods have the queue's names and arguments (the Worker's tests drive a fake
queue with the same surface). They return futures, not coroutines: a settle is a
future and a callback, no task. A connection that is lost fails every verb in
flight on it with redis-py's ConnectionError (the Worker rides it out) and is
opened again by the next verb.

Both connections go where the queue's routes say (emqd/client/routes.py): to the
queue's owner front, else through any front that answers. A line whose
connection was lost tells the routes (that front is passed over for a while) and
opens the next one where they say, after the queue has probed it; a line whose
front is no longer the place (the owner moved, as a look found) moves there at
its next verb, its old connection closed once the replies in flight on it are in.
No verb is sent twice by moving: what was in flight on a lost connection fails
as before, and the Worker's own rules decide. The looks themselves go through the
queue's clients (`Queue.look`), a look due checked at each claim; "not now"
replies on these connections (TRYAGAIN, CLUSTERDOWN) make the next look due.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from emqd.client.commands import (
    Command,
    FailVerdict,
    Job,
    JobInfo,
    Operation,
    QueueCommands,
    Reporter,
)
from emqd.client.connection import Connection, Endpoint, encode
from emqd.client.errors import NOT_NOW, TRANSPORT_ERRORS, is_permanent, reply_error
from emqd.client.routes import Routes

log = logging.getLogger("emqd.worker")


class Connects(Protocol):
    """Where a line's connections come from (the Link; a test's fake)."""

    routes: Routes

    async def connect(self, name: str) -> tuple[str, Connection]: ...


class Line:
    """One connection, opened where the routes say when first needed, again after it
    was lost, and elsewhere once the routes moved (the module's docstring)."""

    def __init__(self, link: Connects, name: str) -> None:
        self.link, self.name = link, name
        self.routes = link.routes
        self.connection: Connection | None = None
        self.url = ""  # where the connection goes
        self.changes = -1  # the routes' `changes` when the connection was last judged
        self._opening: asyncio.Lock | None = None

    @property
    def ready(self) -> Connection | None:
        """The open connection, or None when one must be opened (or judged) first."""
        connection = self.connection
        if connection is None or connection.broken or self.changes != self.routes.changes:
            return None
        return connection

    async def open(self) -> Connection:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            connection = self.connection
            if connection is not None and connection.broken:  # lost: not closed by us
                self.routes.failed(self.url, time.monotonic())
                connection = self.connection = None
            if connection is not None and self.changes != self.routes.changes:
                step = self.routes.step(time.monotonic())
                if step.url != self.url or step.probe:
                    log.debug("moving a connection from %s to %s", self.url, step.url)
                    connection.retire()
                    connection = self.connection = None
            if connection is None:
                self.url, connection = await self.link.connect(self.name)
                self.connection = connection
            self.changes = self.routes.changes
            return connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class Batcher:
    """Operations asked for during one loop turn, sent as one pipeline at its end."""

    def __init__(self, line: Line) -> None:
        self.line = line
        self.pending: list[tuple[Operation[Any], list[Command], asyncio.Future[Any]]] = []
        self.scheduled = False

    def submit(self, operation: Operation[Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._advance(operation, future, None, None)
        return future

    def _advance(self, operation: Operation[Any], future: asyncio.Future[Any],
                 replies: list[Any] | None, error: BaseException | None) -> None:
        """Run the operation to its next batch (queued) or its end (the future's)."""
        try:
            if error is not None:
                batch = operation.throw(error)
            elif replies is not None:
                batch = operation.send(replies)
            else:
                batch = next(operation)
        except StopIteration as done:
            if not future.done():
                future.set_result(done.value)
            return
        except Exception as raised:  # noqa: BLE001 - the operation's own verdict
            if not future.done():
                future.set_exception(raised)
            return
        self.pending.append((operation, batch, future))
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self.scheduled = False
        items, self.pending = self.pending, []
        connection = self.line.ready
        if connection is None:
            asyncio.ensure_future(self._send_once_open(items))
            return
        self._send(connection, items)

    async def _send_once_open(self,
                              items: list[tuple[Operation[Any], list[Command],
                                                asyncio.Future[Any]]]) -> None:
        try:
            connection = await self.line.open()
        except Exception as error:  # noqa: BLE001 - each operation decides what it means
            for operation, _, future in items:
                self._advance(operation, future, None, error)
            return
        self._send(connection, items)

    def _send(self, connection: Connection,
              items: list[tuple[Operation[Any], list[Command], asyncio.Future[Any]]]) -> None:
        replies = connection.send([encode(argv) for _, batch, _ in items for argv in batch])
        replies.add_done_callback(lambda done: self._deliver(items, done))

    def _deliver(self, items: list[tuple[Operation[Any], list[Command], asyncio.Future[Any]]],
                 done: asyncio.Future[list[Any]]) -> None:
        error = done.exception()
        if error is not None:
            for operation, _, future in items:
                self._advance(operation, future, None, error)
            return
        replies = done.result()
        at = 0
        for operation, batch, future in items:
            self._advance(operation, future, replies[at:at + len(batch)], None)
            at += len(batch)


class Link:
    """The queue's worker verbs over the Worker's two connections (see the module's
    docstring), named `name` (CLIENT SETNAME: the dashboard's Workers page). `endpoint`
    is the first URL's (the lease keeper's: its EXTENDs reach the owner from any
    front)."""

    def __init__(self, queue: Any, name: str) -> None:
        self.queue = queue
        self.commands: QueueCommands = queue.commands
        self.routes: Routes = queue.routes
        self.endpoints: dict[str, Endpoint] = {}
        self.endpoint = self.endpoint_for(queue.routes.seeds[0])
        self.claims = Line(self, name)
        self.line = Line(self, name)
        self.batcher = Batcher(self.line)
        self.reporter: Reporter | None = None  # what the claimed jobs report through
        self._looking: asyncio.Future[None] | None = None

    def endpoint_for(self, url: str) -> Endpoint:
        """How the queue's redis-py client of `url` connects and logs in."""
        endpoint = self.endpoints.get(url)
        if endpoint is None:
            endpoint = self.endpoints[url] = Endpoint.of(
                self.queue.client_for(url).connection_pool)
        return endpoint

    async def connect(self, name: str) -> tuple[str, Connection]:
        """A connection where the routes say (the queue probes a front first); a front
        that refuses it is passed over and the next one tried, until one answers or
        the routes have nowhere new to go (then its error is raised)."""
        tried: set[str] = set()
        while True:
            step = await self.queue.route()
            try:
                return step.url, await Connection.open(self.endpoint_for(step.url), name,
                                                       self._translate)
            except TRANSPORT_ERRORS as error:
                if is_permanent(error) or step.url in tried:
                    raise
                tried.add(step.url)
                self.routes.failed(step.url, time.monotonic())

    def _translate(self, error: Any) -> Exception:
        """An error reply as the client names it; a "not now" makes a look due."""
        found = reply_error(error)
        if isinstance(found, NOT_NOW):
            self.routes.refused(time.monotonic())
        return found

    def _look(self) -> None:
        """Ask the fronts where the queue is, when a look is due (beside the claim)."""
        if time.monotonic() >= self.routes.look_at and (
                self._looking is None or self._looking.done()):
            self._looking = asyncio.ensure_future(self.queue.look())
            self._looking.add_done_callback(_looked)

    async def claim(self, lease_ms: int, count: int = 1, block_ms: int | None = None,
                    with_trace: bool = False) -> list[Job]:
        self._look()
        operation = self.commands.claim(lease_ms, count, block_ms, self.reporter, with_trace)
        batch = next(operation)
        connection = await self.claims.open()
        try:
            while True:
                batch = operation.send(await connection.send([encode(argv) for argv in batch]))
        except StopIteration as done:
            jobs: list[Job] = done.value
            return jobs

    def where(self) -> Endpoint:
        """Where the claims go now (the lease keeper follows them there)."""
        return self.endpoint_for(self.claims.url or self.routes.seeds[0])

    def client_ids(self) -> list[int]:
        """The CLIENT IDs of the connections open now (the lease keeper's `holder`s)."""
        return [line.connection.client_id for line in (self.claims, self.line)
                if line.ready is not None and line.connection is not None]

    def ping(self) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.ping())

    def complete(self, job: Job, result: Any = None) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.complete(job, result))

    def fail(self, job: Job, error: str | None = None, *, max_attempts: int | None = None,
             backoff_ms: int | None = None) -> asyncio.Future[FailVerdict]:
        return self.batcher.submit(self.commands.fail(job, error, max_attempts=max_attempts,
                                                      backoff_ms=backoff_ms))

    def requeue(self, job: Job, delay_ms: int | None = None) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.requeue(job, delay_ms))

    def beat(self, name: str) -> asyncio.Future[str]:
        return self.batcher.submit(self.commands.beat(name))

    def extend(self, job: Job, lease_ms: int) -> asyncio.Future[int]:
        return self.batcher.submit(self.commands.extend(job, lease_ms))

    def progress(self, job: Job, value: Any) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.progress(job, value))

    def log(self, job: Job, line: Any) -> asyncio.Future[int]:
        return self.batcher.submit(self.commands.log(job, line))

    def children(self, job_id: str) -> asyncio.Future[Any]:
        return self.batcher.submit(self.commands.children(job_id))

    def get(self, job_id: str) -> asyncio.Future[JobInfo | None]:
        return self.batcher.submit(self.commands.get(job_id))

    def close(self) -> None:
        """Close both connections (a parked claim's reply is lost with it: only once the
        worker is done)."""
        self.claims.close()
        self.line.close()


def _looked(looking: asyncio.Future[None]) -> None:
    """A look went wrong in a way the queue did not expect: the next one tries again."""
    if not looking.cancelled() and looking.exception() is not None:
        log.debug("a look at the fronts failed: %r", looking.exception())
