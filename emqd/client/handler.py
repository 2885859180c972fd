"""Running handlers: an async function as a task on the loop, a plain function on one
of the worker's threads; and how a running handler reports (`job.progress`,
`job.log`) from either.

Plain functions run on a pool of daemon threads (`Threads`) that grows to the
concurrency as jobs wait for a thread, so a handler that blocks holds only its
own thread and slot. Hand-offs are batched both ways: a thread that finishes a
job takes the next waiting one without sleeping (queue.SimpleQueue wakes a
thread only when none is awake), and the results of a loop turn's worth of
finished jobs reach the loop through one wake-up (`call_soon_threadsafe` once
until the loop has read them), where a thread per job cost a thread start and a
wake-up each (the profile in docs/PERFORMANCE.md, "The worker").

A handler that hangs past its timeout is abandoned: its thread runs on (a thread
cannot be stopped), its result is dropped, and the pool starts another thread
for the slot; daemon threads keep such a thread from holding the process open
after SIGTERM.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from emqd.client.commands import Job

Handler = Callable[[Job], Any]
#: What a thread hands back: the run it was given, the return value, the exception.
Done = tuple[Any, Any, BaseException | None]


def is_async(handler: Handler) -> bool:
    """An async function, a partial of one, or an object whose __call__ is async."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__)


class Threads:
    """Runs `handler(run.job)` for submitted runs on up to as many threads as runs are
    in them (abandoned ones included), and hands the results to `deliver` on the loop,
    a batch at a time. A run whose `context` is not None (a traced run's: tracing.py)
    runs in that contextvars context."""

    def __init__(self, handler: Handler, loop: asyncio.AbstractEventLoop,
                 deliver: Callable[[list[Done]], None]) -> None:
        self.handler, self.loop, self.deliver = handler, loop, deliver
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.outbox: deque[Done] = deque()
        self.threads: list[threading.Thread] = []
        self.occupied = 0  # runs submitted and not yet handed back (read on the loop only)
        self.wake_pending = False

    def submit(self, run: Any) -> None:
        self.occupied += 1
        if self.occupied > len(self.threads):
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"emqd-handler-{len(self.threads)}")
            self.threads.append(thread)
            thread.start()
        self.inbox.put(run)

    def close(self) -> None:
        """Idle threads exit; busy ones exit after their job (their results dropped)."""
        for _ in self.threads:
            self.inbox.put(None)

    def _work(self) -> None:
        inbox, outbox, handler = self.inbox, self.outbox, self.handler
        while True:
            run = inbox.get()
            if run is None:
                return
            try:
                context = run.context
                value = handler(run.job) if context is None else context.run(handler, run.job)
                done: Done = (run, value, None)
            except BaseException as error:  # noqa: BLE001 - handed to the loop, never lost
                done = (run, None, error)
            outbox.append(done)
            if not self.wake_pending:
                self.wake_pending = True
                try:
                    self.loop.call_soon_threadsafe(self._hand_back)
                except RuntimeError:
                    return  # the loop is closed: the job was abandoned long ago

    def _hand_back(self) -> None:
        """On the loop: every result so far, in one batch."""
        self.wake_pending = False  # before reading: a result appended after is woken for
        outbox, batch = self.outbox, []
        while outbox:
            batch.append(outbox.popleft())
        self.occupied -= len(batch)
        self.deliver(batch)


class ThroughWorker:
    """The `Reporter` of a Worker's jobs: the verbs go through the worker's link, on the
    worker's loop, and through `report` (Worker._report), which rides out a lost
    connection. Called on that loop (an async handler) it returns the coroutine, to be
    awaited; called from any other thread (a plain handler's) it runs the verb on the
    loop and blocks until the server answered, so a plain function reports with a
    plain call. Either way a refusal (StaleJob: the lease is gone; JobCancelled)
    reaches the handler. `cancelled` holds the (id, token) of the runs the worker
    learned were cancelled, while their handlers still run (`job.cancelled`)."""

    __slots__ = ("link", "loop", "report", "cancelled")

    def __init__(self, link: Any, loop: asyncio.AbstractEventLoop,
                 report: Callable[[Job, Callable[[], Awaitable[Any]]], Awaitable[Any]]
                 ) -> None:
        self.link, self.loop, self.report = link, loop, report
        self.cancelled: set[tuple[str, str]] = set()

    def is_cancelled(self, job: Job) -> bool:
        return (job.id, job.token) in self.cancelled

    def progress(self, job: Job, value: Any) -> Any:
        return self._run(job, lambda: self.link.progress(job, value))

    def log(self, job: Job, line: Any) -> Any:
        return self._run(job, lambda: self.link.log(job, line))

    def children(self, job: Job) -> Any:
        return self._run(job, lambda: self.link.children(job.id))

    def _run(self, job: Job, make: Callable[[], Awaitable[Any]]) -> Any:
        verb = self.report(job, make)
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            return verb
        return asyncio.run_coroutine_threadsafe(verb, self.loop).result()  # type: ignore[arg-type]
