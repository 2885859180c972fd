"""How a job's run ends, decided without I/O: which verb settles it, with which options.

A run ends in one of four ways, whichever comes first:
- the handler returned            -> COMPLETE with its return value as RESULT;
- the handler raised              -> FAIL with ERROR "Type: message"
  (`Retry(delay_ms)` adds BACKOFF delay_ms, `Discard` adds MAXATTEMPTS 1);
  (`Snooze(seconds)` sends REQUEUE with DELAY instead: no failure spent);
- the timeout passed              -> FAIL with ERROR "timeout";
- the worker is shutting down     -> REQUEUE (the job goes back to the front, no budget spent);
and a fifth, `LOST`, when the lease was lost or the job cancelled: nothing is sent at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from emqd.client.commands import FailVerdict, Job
from emqd.client.errors import Discard, Retry, Snooze

TIMEOUT_ERROR = "timeout"


class Settles(Protocol):
    """What a settlement is sent through: the Worker's link (client/link.py), or a test's
    fake queue; each method returns a future or a coroutine, not yet awaited."""

    def complete(self, job: Job, result: Any = None) -> Awaitable[None]: ...

    def fail(self, job: Job, error: str | None = None, *, max_attempts: int | None = None,
             backoff_ms: int | None = None) -> Awaitable[FailVerdict]: ...

    def requeue(self, job: Job, delay_ms: int | None = None) -> Awaitable[None]: ...


# Each settlement's `send` returns what the queue's (or the Worker's link's) method
# returns, a future or a coroutine, without awaiting it: the Worker settles with a
# future and a callback, not a task a job.
@dataclass(frozen=True)
class Complete:
    result: Any = None

    def send(self, queue: Settles, job: Job) -> Awaitable[None]:
        return queue.complete(job, self.result)


@dataclass(frozen=True)
class Fail:
    """FAIL with `error` as ERROR; `cause` is what the worker's `on_failed` hook gets: the
    handler's exception, or a TimeoutError for a run past its timeout."""

    error: str
    max_attempts: int | None = None
    backoff_ms: int | None = None
    cause: BaseException | None = field(default=None, compare=False, repr=False)

    def send(self, queue: Settles, job: Job) -> Awaitable[FailVerdict]:
        return queue.fail(job, self.error, max_attempts=self.max_attempts,
                          backoff_ms=self.backoff_ms)


@dataclass(frozen=True)
class Requeue:
    """REQUEUE: back without a failure; with `delay_ms` (a Snooze) after that long."""

    delay_ms: int | None = None

    def send(self, queue: Settles, job: Job) -> Awaitable[None]:
        if self.delay_ms is None:
            return queue.requeue(job)
        return queue.requeue(job, delay_ms=self.delay_ms)


Settlement = Complete | Fail | Requeue
#: The lease was lost (EMQSTALE: another holder may own the job), or the job was
#: cancelled (EMQCANCELLED: it is finished): send nothing.
LOST = None
REQUEUE = Requeue()


def timed_out(timeout_ms: int) -> Fail:
    return Fail(TIMEOUT_ERROR, cause=TimeoutError(f"handler ran past {timeout_ms} ms"))


def error_text(error: BaseException) -> str:
    """`Type: message`, or just `Type` when the message is empty."""
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def for_exception(error: BaseException) -> Fail | Requeue:
    if isinstance(error, Snooze):
        return Requeue(error.delay_ms)
    if isinstance(error, Retry):
        return Fail(error_text(error), backoff_ms=error.delay_ms, cause=error)
    if isinstance(error, Discard):
        return Fail(error_text(error), max_attempts=1, cause=error)
    return Fail(error_text(error), cause=error)


def for_return(value: Any, error: BaseException | None) -> Settlement:
    """The settlement for a handler that returned `value` or raised `error`."""
    return Complete(value) if error is None else for_exception(error)


def for_handler(done: asyncio.Future[Any]) -> Settlement:
    """The settlement for a handler future that has finished by itself."""
    if done.cancelled():
        return Fail("CancelledError", cause=asyncio.CancelledError())
    error = done.exception()
    return for_return(None if error is not None else done.result(), error)
