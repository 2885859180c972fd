"""Which verb settles a run: decided from the handler's future, without I/O."""

from __future__ import annotations

import asyncio

import pytest

from emqd.client import outcome
from emqd.client.errors import Discard, Retry


def finished(value: object = None, error: BaseException | None = None,
             cancelled: bool = False) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    if cancelled:
        future.cancel()
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


async def test_a_return_value_completes_with_it() -> None:
    assert outcome.for_handler(finished({"sent": 1})) == outcome.Complete({"sent": 1})
    assert outcome.for_handler(finished(None)) == outcome.Complete(None)


async def test_an_exception_fails_with_type_and_message() -> None:
    error = ValueError("bad address")
    failed = outcome.for_handler(finished(error=error))
    assert failed == outcome.Fail("ValueError: bad address")
    assert failed.cause is error  # what on_failed gets
    assert outcome.for_handler(finished(error=KeyError())) == outcome.Fail("KeyError")


async def test_retry_sets_backoff_and_discard_caps_at_one() -> None:
    assert outcome.for_handler(finished(error=Retry(250))) == outcome.Fail(
        "Retry: retry in 250 ms", backoff_ms=250)
    assert outcome.for_handler(finished(error=Retry())) == outcome.Fail("Retry: retry")
    assert outcome.for_handler(finished(error=Discard("spam"))) == outcome.Fail(
        "Discard: spam", max_attempts=1)


async def test_a_handler_that_cancelled_itself_fails() -> None:
    assert outcome.for_handler(finished(cancelled=True)) == outcome.Fail("CancelledError")


def test_retry_rejects_negative_delays() -> None:
    with pytest.raises(ValueError):
        Retry(-1)


def test_the_fixed_endings() -> None:
    timed_out = outcome.timed_out(250)
    assert timed_out == outcome.Fail("timeout")
    assert isinstance(timed_out.cause, TimeoutError) and "250 ms" in str(timed_out.cause)
    assert outcome.REQUEUE == outcome.Requeue()
    assert outcome.LOST is None
