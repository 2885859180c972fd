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
"""

from __future__ import annotations

import asyncio
from typing import Any

from emqd.client.commands import (
    Command,
    FailVerdict,
    Job,
    Operation,
    QueueCommands,
    Reporter,
)
from emqd.client.connection import Connection, Endpoint, encode


class Line:
    """One connection, opened when first needed and again after it was lost."""

    def __init__(self, endpoint: Endpoint, name: str) -> None:
        self.endpoint, self.name = endpoint, name
        self.connection: Connection | None = None
        self._opening: asyncio.Lock | None = None

    @property
    def ready(self) -> Connection | None:
        """The open connection, or None when one must be opened first."""
        connection = self.connection
        return connection if connection is not None and not connection.broken else None

    async def open(self) -> Connection:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            connection = self.ready
            if connection is None:
                connection = self.connection = await Connection.open(self.endpoint, self.name)
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
    docstring), named `name` (CLIENT SETNAME: the dashboard's Workers page)."""

    def __init__(self, queue: Any, name: str) -> None:
        self.commands: QueueCommands = queue.commands
        self.endpoint = endpoint = Endpoint.of(queue.client.connection_pool)
        self.claims = Line(endpoint, name)
        self.line = Line(endpoint, name)
        self.batcher = Batcher(self.line)
        self.reporter: Reporter | None = None  # what the claimed jobs report through


    async def claim(self, lease_ms: int, count: int = 1,
                    block_ms: int | None = None) -> list[Job]:
        operation = self.commands.claim(lease_ms, count, block_ms, self.reporter)
        batch = next(operation)
        connection = await self.claims.open()
        try:
            while True:
                batch = operation.send(await connection.send([encode(argv) for argv in batch]))
        except StopIteration as done:
            jobs: list[Job] = done.value
            return jobs

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

    def requeue(self, job: Job) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.requeue(job))

    def extend(self, job: Job, lease_ms: int) -> asyncio.Future[int]:
        return self.batcher.submit(self.commands.extend(job, lease_ms))

    def progress(self, job: Job, value: Any) -> asyncio.Future[None]:
        return self.batcher.submit(self.commands.progress(job, value))

    def log(self, job: Job, line: Any) -> asyncio.Future[int]:
        return self.batcher.submit(self.commands.log(job, line))

    def children(self, job_id: str) -> asyncio.Future[Any]:
        return self.batcher.submit(self.commands.children(job_id))

    def close(self) -> None:
        """Close both connections (a parked claim's reply is lost with it: only once the
        worker is done)."""
        self.claims.close()
        self.line.close()
