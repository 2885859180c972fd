"""Starting a handler: an async function as a task, a plain function in its own thread.

A sync handler runs in a daemon thread rather than an executor: a handler that
hangs past its timeout is abandoned (its result ignored), and an executor's
worker threads would be joined at interpreter exit, so one hung handler would
keep the process from ever exiting after SIGTERM.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from emqd.client.commands import Job

Handler = Callable[[Job], Any]


def is_async(handler: Handler) -> bool:
    """An async function, a partial of one, or an object whose __call__ is async."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__)


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
