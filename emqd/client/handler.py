"""Starting a handler: an async function as a task, a plain function in its own thread;
and how a running handler reports (`job.progress`, `job.log`) from either.

A sync handler runs in a daemon thread rather than an executor: a handler that
hangs past its timeout is abandoned (its result ignored), and an executor's
worker threads would be joined at interpreter exit, so one hung handler would
keep the process from ever exiting after SIGTERM.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from emqd.client.commands import Job

Handler = Callable[[Job], Any]


def is_async(handler: Handler) -> bool:
    """An async function, a partial of one, or an object whose __call__ is async."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__)


class ThroughWorker:
    """A job's `Reporter` inside a Worker: the verbs go through the worker's queue, on
    the worker's loop, and through `report` (Worker._report), which rides out a lost
    connection. Called on that loop (an async handler) it returns the coroutine, to be
    awaited; called from any other thread (a plain handler's) it runs the verb on the
    loop and blocks until the server answered, so a plain function reports with a
    plain call. Either way a refusal (StaleJob: the lease is gone) reaches the handler."""

    __slots__ = ("queue", "loop", "report")

    def __init__(self, queue: Any, loop: asyncio.AbstractEventLoop,
                 report: Callable[[Callable[[], Awaitable[Any]]], Coroutine[Any, Any, Any]]
                 ) -> None:
        self.queue, self.loop, self.report = queue, loop, report

    def progress(self, job: Job, value: Any) -> Any:
        return self._run(lambda: self.queue.progress(job, value))

    def log(self, job: Job, line: Any) -> Any:
        return self._run(lambda: self.queue.log(job, line))

    def children(self, job: Job) -> Any:
        return self._run(lambda: self.queue.children(job.id))

    def _run(self, make: Callable[[], Awaitable[Any]]) -> Any:
        verb = self.report(make)
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            return verb
        return asyncio.run_coroutine_threadsafe(verb, self.loop).result()


def start(handler: Handler, job: Job) -> asyncio.Future[Any]:
    """The handler's future. Cancelling it cancels an async handler; a thread cannot be
    stopped, so cancelling only detaches it and whatever it returns later is dropped."""
    if is_async(handler):
        return asyncio.ensure_future(handler(job))
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def resolve(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def target() -> None:
        try:
            value, error = handler(job), None
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, never lost
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(resolve, value, error)
        except RuntimeError:
            pass  # the loop is closed: the job was abandoned long ago

    threading.Thread(target=target, name=f"emqd-job-{job.id}", daemon=True).start()
    return future
