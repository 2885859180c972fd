"""The Worker's state machine against FakeQueue: no server, real asyncio, short real delays.

Every wait is bounded by `until()`'s deadline, and every worker is stopped in
`running()`'s teardown, so a broken worker fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.exceptions import AuthenticationError, ResponseError

from emqd.client import Discard, Retry, Worker
from emqd.client.commands import Job
from emqd.client.errors import PermanentError, StaleJob
from tests.client.fake import FakeQueue


async def until(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task]:
    task = asyncio.create_task(worker.run())
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, 5)


def states(queue: FakeQueue) -> dict[str, str]:
    return {job_id: row.state for job_id, row in queue.rows.items()}


async def test_async_and_sync_handlers_complete_with_their_return_value() -> None:
    async def shout(job: Job) -> bytes:
        return job.payload.upper()

    def count(job: Job) -> dict:
        assert threading.current_thread() is not threading.main_thread()
        return {"len": len(job.payload)}

    for handler, expected in ((shout, b"HI"), (count, {"len": 2})):
        queue = FakeQueue()
        queue.put(b"hi")
        worker = Worker(queue, handler, block_ms=20)
        async with running(worker):
            await until(lambda q=queue: states(q) == {"1": "completed"})
        assert queue.rows["1"].result == expected
        assert worker.counts.completed == 1 and worker.counts.claimed == 1


async def test_job_sees_its_failures_and_json() -> None:
    seen = []
    queue = FakeQueue()
    queue.put(b'{"to": "ada"}')
    queue.rows["1"].failures = 2

    async def handler(job: Job) -> None:
        seen.append((job.id, job.token, job.failures, job.json()))

    async with running(Worker(queue, handler, block_ms=20)):
        await until(lambda: seen != [])
    assert seen == [("1", "1", 2, {"to": "ada"})]


async def test_exceptions_fail_with_type_and_message_retry_and_discard_steer() -> None:
    async def handler(job: Job) -> None:
        if job.payload == b"retry":
            raise Retry(250)
        if job.payload == b"discard":
            raise Discard("never")
        raise ValueError("bad address")

    queue = FakeQueue()
    queue.put(b"plain", b"retry", b"discard")
    worker = Worker(queue, handler, block_ms=20)
    async with running(worker):
        await until(lambda: len(queue.verbs("fail")) == 3)
    fails = {call[1]: call[3:] for call in queue.verbs("fail")}
    assert fails == {"1": ("ValueError: bad address", None, None),
                     "2": ("Retry: retry in 250 ms", None, 250),
                     "3": ("Discard: never", 1, None)}
    assert states(queue) == {"1": "scheduled", "2": "scheduled", "3": "dead"}
    assert (worker.counts.failed, worker.counts.dead) == (3, 1)


async def test_never_more_than_concurrency_handlers_and_claims_ask_for_free_slots() -> None:
    """A claim asks for the free slots, at most a quarter of the concurrency at once (the
    next batches are claimed while one runs: docs/PERFORMANCE.md, "The worker")."""
    active, peak = 0, 0

    async def handler(job: Job) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1

    queue = FakeQueue()
    queue.put(*[b"x"] * 30)
    async with running(Worker(queue, handler, concurrency=8, block_ms=20)):
        await until(lambda: set(states(queue).values()) == {"completed"})
    assert peak == 8
    counts = [call[1] for call in queue.verbs("claim")]
    assert counts[0] == 2 and all(1 <= n <= 2 for n in counts)
    assert all(call[2] == 20 for call in queue.verbs("claim"))


async def test_heartbeat_extends_every_third_of_the_lease() -> None:
    queue = FakeQueue()
    queue.put(b"slow")

    async def handler(job: Job) -> str:
        await asyncio.sleep(0.5)
        return "done"

    async with running(Worker(queue, handler, lease_ms=150, block_ms=20)):
        await until(lambda: states(queue) == {"1": "completed"})
    extends = queue.verbs("extend")
    assert 5 <= len(extends) <= 11, len(extends)  # 0.5 s / 50 ms, less when the machine is busy
    assert all(call[1:] == ("1", "1") for call in extends)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_timeout_stops_extending_and_fails_with_timeout(kind: str) -> None:
    cancelled = threading.Event()
    release = threading.Event()

    async def hang_async(job: Job) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    def hang_sync(job: Job) -> str:
        release.wait(5)
        return "late"

    queue = FakeQueue()
    queue.put(b"hang")
    worker = Worker(queue, hang_async if kind == "async" else hang_sync,
                    lease_ms=90, timeout_ms=200, block_ms=20)
    try:
        async with running(worker):
            await until(lambda: queue.verbs("fail") != [])
            extends_at_fail = len(queue.verbs("extend"))
            await asyncio.sleep(0.15)
            assert len(queue.verbs("extend")) == extends_at_fail  # no extends after timeout
    finally:
        release.set()
    assert queue.verbs("fail") == [("fail", "1", "1", "timeout", None, None)]
    assert worker.counts.timed_out == 1 and worker.counts.completed == 0
    if kind == "async":
        assert cancelled.is_set()
    await asyncio.sleep(0.05)  # the released thread's late result is ignored
    assert queue.verbs("complete") == []


async def test_a_lost_lease_is_logged_once_and_nothing_more_is_sent(
        caplog: pytest.LogCaptureFixture) -> None:
    queue = FakeQueue()
    queue.put(b"slow")
    gate = asyncio.Event()

    async def handler(job: Job) -> str:
        await gate.wait()
        return "done"

    worker = Worker(queue, handler, lease_ms=60, block_ms=20)
    with caplog.at_level(logging.WARNING, logger="emqd.worker"):
        async with running(worker):
            await until(lambda: queue.rows["1"].state == "active")
            queue.rows["1"].attempts = 2  # someone else claimed it: our token is stale
            await until(lambda: worker.counts.lost == 1)
            gate.set()
            await asyncio.sleep(0.1)
    assert queue.verbs("complete") == [] and len(queue.verbs("extend")) == 1
    lost_lines = [r for r in caplog.records if "lease lost" in r.getMessage()]
    assert len(lost_lines) == 1 and "token mismatch" in lost_lines[0].getMessage()


async def test_a_stale_settle_is_logged_once_and_not_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    queue = FakeQueue()
    queue.put(b"x")

    async def handler(job: Job) -> None:
        queue.recover(job.id)  # the sweep took the job back while the handler ran
        queue.pending.clear()

    worker = Worker(queue, handler, block_ms=20)
    with caplog.at_level(logging.WARNING, logger="emqd.worker"):
        async with running(worker):
            await until(lambda: worker.counts.lost == 1)
    assert len(queue.verbs("complete")) == 1
    assert sum("lease lost" in r.getMessage() for r in caplog.records) == 1


async def test_a_complete_whose_answer_was_lost_and_whose_retry_is_stale_is_looked_up() -> None:
    """The first COMPLETE took effect and its answer was lost (its front died): the retry
    meets EMQSTALE, and the row, completed under this run's token, says it was ours."""
    queue = FakeQueue()
    queue.put(b"x")
    queue.answers_lost = 1
    heard: list[tuple[str, Any]] = []
    worker = Worker(queue, lambda job: "done", block_ms=20,
                    on_completed=lambda job, result: heard.append((job.id, result)))
    async with running(worker):
        await until(lambda: worker.counts.completed == 1)
    assert len(queue.verbs("complete")) == 2 and queue.verbs("get") == [("get", "1")]
    assert heard == [("1", "done")] and worker.counts.lost == 0


async def test_a_complete_retried_after_the_job_went_to_another_holder_is_a_lost_lease() -> None:
    """The first COMPLETE never arrived; meanwhile the job was recovered and claimed again
    (a higher token): the retry's EMQSTALE is a lost lease, whatever state the row is in."""
    queue = FakeQueue()
    queue.put(b"x")
    heard: list[str] = []

    def handler(job: Job) -> str:
        queue.down = True  # the COMPLETE will not get through...
        return "done"

    worker = Worker(queue, handler, block_ms=20,
                    on_completed=lambda job, result: heard.append(job.id))
    async with running(worker):
        await until(lambda: len(queue.verbs("complete")) == 0 and queue.attempts > 2)
        queue.recover("1")  # ...while the sweep takes the job back
        row = queue.rows["1"]
        row.attempts, row.state = row.attempts + 1, "completed"  # and another holder ends it
        queue.pending.clear()
        queue.down = False
        await until(lambda: worker.counts.lost == 1)
    assert queue.verbs("get") == [("get", "1")] and heard == []


async def test_stop_lets_running_jobs_finish_within_grace_then_requeues_the_rest() -> None:
    queue = FakeQueue()
    queue.put(b"quick", b"stuck", b"waiting")

    async def handler(job: Job) -> str:
        await asyncio.sleep(0.05 if job.payload == b"quick" else 30)
        return "ok"

    worker = Worker(queue, handler, concurrency=2, grace_ms=300, block_ms=20)
    task = asyncio.create_task(worker.run())
    await until(lambda: queue.rows["2"].state == "active")
    started = time.monotonic()
    worker.stop()
    counts = await asyncio.wait_for(task, 5)
    assert 0.25 <= time.monotonic() - started < 1.0
    assert states(queue) == {"1": "completed", "2": "pending", "3": "pending"}
    assert counts.requeued == 1 and counts.completed == 1
    assert queue.verbs("requeue") == [("requeue", "2", "1")]


async def test_a_second_stop_ends_the_grace_period() -> None:
    queue = FakeQueue()
    queue.put(b"stuck")

    async def handler(job: Job) -> None:
        await asyncio.sleep(30)

    worker = Worker(queue, handler, grace_ms=10_000, block_ms=20)
    task = asyncio.create_task(worker.run())
    await until(lambda: queue.rows["1"].state == "active")
    worker.stop()
    await asyncio.sleep(0.05)
    worker.stop()
    await asyncio.wait_for(task, 2)
    assert states(queue) == {"1": "pending"}


async def test_jobs_claimed_while_stopping_go_straight_back() -> None:
    queue = FakeQueue()
    ran = []

    async def handler(job: Job) -> None:
        ran.append(job.id)

    worker = Worker(queue, handler, block_ms=300)
    task = asyncio.create_task(worker.run())
    await until(lambda: queue.verbs("claim") != [])
    worker.stop()  # the claim is parked; a job arrives before it returns
    queue.put(b"late")
    await asyncio.wait_for(task, 2)
    assert ran == [] and states(queue) == {"1": "pending"}
    assert queue.verbs("requeue") == [("requeue", "1", "1")]


async def test_reconnect_backs_off_and_drops_jobs_recovered_while_away() -> None:
    queue = FakeQueue()
    queue.put(b"a", b"b")
    gate = asyncio.Event()
    runs: list[tuple[str, str]] = []

    async def handler(job: Job) -> str:
        runs.append((job.id, job.token))
        await gate.wait()
        return job.token

    worker = Worker(queue, handler, lease_ms=90, block_ms=20)
    async with running(worker):
        await until(lambda: len(runs) == 2)
        queue.down = True
        queue.changed.set()
        await asyncio.sleep(0.2)
        # While the worker was away, the server's sweep recovered job 1.
        queue.recover("1")
        queue.down = False
        await until(lambda: len(runs) == 3)
        gate.set()
        await until(lambda: states(queue) == {"1": "completed", "2": "completed"})
    # Job 1 ran again only after its old run was dropped (token 1 -> lost),
    # and the old holder never settled it.
    assert runs == [("1", "1"), ("2", "1"), ("1", "2")]
    completes = [call[1:3] for call in queue.verbs("complete")]
    assert sorted(completes) == [("1", "2"), ("2", "1")]
    assert worker.counts.lost == 1 and worker.counts.reconnects >= 1
    assert queue.rows["1"].result == "2"


async def test_the_same_job_claimed_again_drops_the_old_run() -> None:
    queue = FakeQueue()
    queue.put(b"a")
    gate = asyncio.Event()
    runs: list[str] = []

    async def handler(job: Job) -> str:
        runs.append(job.token)
        await gate.wait()
        return job.token

    worker = Worker(queue, handler, lease_ms=10_000, block_ms=20)
    async with running(worker):
        await until(lambda: runs == ["1"])
        queue.recover("1")  # handed out again without the worker noticing a reconnect
        await until(lambda: runs == ["1", "2"])
        gate.set()
        await until(lambda: states(queue) == {"1": "completed"})
    assert [call[2] for call in queue.verbs("complete")] == ["2"]
    assert worker.counts.lost == 1


def test_run_sync_runs_its_own_loop_stops_from_another_thread_and_closes_the_queue() -> None:
    queue = FakeQueue()
    queue.put(b"x")
    worker = Worker(queue, lambda job: "ok", block_ms=10)
    thread = threading.Thread(target=worker.run_sync)
    thread.start()
    deadline = time.monotonic() + 3
    while queue.rows["1"].state != "completed" and time.monotonic() < deadline:
        time.sleep(0.005)
    worker.stop()
    thread.join(5)
    assert not thread.is_alive() and queue.closed
    assert queue.rows["1"].state == "completed"


def test_worker_refuses_bad_settings() -> None:
    for bad in ({"concurrency": 0}, {"lease_ms": 2}, {"timeout_ms": 0}, {"grace_ms": -1},
                {"block_ms": 0}):
        with pytest.raises(ValueError):
            Worker(FakeQueue(), lambda job: None, **bad)


async def test_an_unexpected_extend_error_does_not_stop_the_job_from_settling() -> None:
    from redis.exceptions import ResponseError

    queue = FakeQueue()
    queue.put(b"x")

    async def refuse(job: Job, lease_ms: int) -> int:
        raise ResponseError("ERR something odd")

    queue.extend = refuse  # type: ignore[method-assign]

    async def handler(job: Job) -> str:
        await asyncio.sleep(0.1)
        return "ok"

    async with running(Worker(queue, handler, lease_ms=30, block_ms=20)):
        await until(lambda: states(queue) == {"1": "completed"})


async def test_the_grace_period_starts_at_stop_even_while_a_claim_is_parked() -> None:
    queue = FakeQueue()
    queue.put(b"stuck")

    async def handler(job: Job) -> None:
        await asyncio.sleep(30)

    worker = Worker(queue, handler, concurrency=2, grace_ms=300, block_ms=500)
    task = asyncio.create_task(worker.run())
    await until(lambda: len(queue.verbs("claim")) == 2)  # the second claim is parked
    started = time.monotonic()
    worker.stop()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - started < 0.7  # not block_ms + grace_ms
    assert states(queue) == {"1": "pending"}


@pytest.mark.parametrize(("refusal", "named"), [
    (AuthenticationError("invalid username-password pair or user is disabled."),
     "claim refused: AuthenticationError: invalid username-password pair"),
    (AuthenticationError("Authentication required."),
     "claim refused: AuthenticationError: Authentication required."),
    (ResponseError("syntax error"), "claim refused: ResponseError: syntax error"),
    (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
     "claim refused: ResponseError: WRONGTYPE"),
])
async def test_a_permanent_refusal_stops_the_worker_and_names_its_cause(
        refusal: Exception, named: str) -> None:
    """A wrong password used to be retried forever, logged once as a lost connection."""
    queue = FakeQueue(refusal=refusal)
    worker = Worker(queue, lambda job: "ok", block_ms=20)
    with pytest.raises(PermanentError, match=re.escape(named)) as raised:
        await asyncio.wait_for(worker.run(), 3)
    assert raised.value.cause is refusal
    assert queue.attempts == 1  # given up at once, not retried


async def test_a_password_refused_mid_run_stops_the_worker_without_grace() -> None:
    queue = FakeQueue()
    queue.put(b"x")
    started = asyncio.Event()

    async def handler(job: Job) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    worker = Worker(queue, handler, lease_ms=60, grace_ms=10_000, block_ms=20)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 3)
    queue.refusal = AuthenticationError("invalid username-password pair or user is disabled.")
    with pytest.raises(PermanentError, match="refused: AuthenticationError"):
        await asyncio.wait_for(task, 3)  # no 10 s grace: nothing could be settled anyway
    assert queue.verbs("complete") == []


async def test_an_outage_is_two_warnings_and_each_retry_a_debug_line_with_its_delay(
        caplog: pytest.LogCaptureFixture) -> None:
    """One WARNING when the connection is lost and one when it is back, however many
    retries (issue 25, item 4: a 3 s restart printed ~100); each retry, with its delay,
    at DEBUG."""
    queue = FakeQueue(down=True)
    worker = Worker(queue, lambda job: "ok", block_ms=20)
    with caplog.at_level(logging.DEBUG, logger="emqd.worker"):
        async with running(worker):
            await until(lambda: queue.attempts >= 4)
            queue.down = False
            queue.put(b"x")
            await until(lambda: states(queue) == {"1": "completed"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "connection lost (ConnectionError: fake server is down)" in warnings[0]
    assert "the server answers again" in warnings[1]
    retries = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
               and r.getMessage().startswith("claim: connection lost")]
    assert len(retries) >= 3
    assert retries[0] == "claim: connection lost (fake server is down); retrying in 0.05 s"
    assert retries[1].endswith("retrying in 0.10 s")  # backing off
    assert worker.counts.reconnects == 1


async def test_a_refusal_that_means_not_now_is_retried(caplog: pytest.LogCaptureFixture) -> None:
    """MISCONF (the server cannot write its log) passes: the worker waits it out."""
    queue = FakeQueue(refusal=ResponseError("MISCONF Errors writing to the AOF file"))
    queue.put(b"x")
    with caplog.at_level(logging.DEBUG, logger="emqd.worker"):
        async with running(Worker(queue, lambda job: "ok", block_ms=20)):
            await until(lambda: queue.attempts >= 3)
            queue.refusal = None
            await until(lambda: states(queue) == {"1": "completed"})
    assert any("refused for now (ResponseError: MISCONF" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
    assert any(r.getMessage().startswith("claim: refused for now (MISCONF")
               for r in caplog.records)


async def test_a_settling_verb_refused_for_now_is_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    queue = FakeQueue()
    queue.put(b"x")
    gate = asyncio.Event()

    async def handler(job: Job) -> str:
        await gate.wait()
        return "ok"

    def complete_retries() -> int:
        return sum("job 1: COMPLETE: refused for now" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.DEBUG, logger="emqd.worker"):
        async with running(Worker(queue, handler, lease_ms=5000, block_ms=20)):
            await until(lambda: queue.rows["1"].state == "active")
            queue.refusal = ResponseError("MISCONF Errors writing to the AOF file")
            gate.set()
            await until(lambda: complete_retries() >= 2)
            queue.refusal = None
            await until(lambda: states(queue) == {"1": "completed"})


async def test_a_report_over_a_lost_connection_waits_and_charges_nothing() -> None:
    """job.progress while the server is away: the handler waits for it to come back,
    never sees the connection error, and its job completes with no failure."""
    queue = FakeQueue()
    queue.put(b"x")
    reported = asyncio.Event()

    async def handler(job: Job) -> str:
        queue.down = True
        await job.progress(50)  # held until the server is back
        reported.set()
        return "ok"

    async with running(Worker(queue, handler, lease_ms=5000, block_ms=20)):
        await until(lambda: queue.attempts >= 3)
        assert not reported.is_set()
        queue.down = False
        await until(lambda: states(queue) == {"1": "completed"})
    assert queue.rows["1"].failures == 0
    assert ("progress", "1", "1", 50) in queue.calls


# --- a handler reports; hooks hear of what the server accepted ------------------------------
async def test_job_progress_and_log_carry_the_token_from_both_kinds_of_handler() -> None:
    async def reports(job: Job) -> None:
        await job.progress(50)
        assert await job.log("half way") == 1

    def reports_too(job: Job) -> None:
        assert threading.current_thread() is not threading.main_thread()
        job.progress({"done": 2})  # a plain call: it blocks until the answer
        assert job.log(b"bytes too") == 2

    queue = FakeQueue()
    queue.put(b"a")
    async with running(Worker(queue, reports, block_ms=20)):
        await until(lambda: states(queue) == {"1": "completed"})
    queue.put(b"b")
    async with running(Worker(queue, reports_too, block_ms=20)):
        await until(lambda: states(queue)["2"] == "completed")
    assert queue.verbs("progress") == [("progress", "1", "1", 50),
                                       ("progress", "2", "1", {"done": 2})]
    assert queue.verbs("log") == [("log", "1", "1", "half way"), ("log", "2", "1", b"bytes too")]


async def test_a_stale_report_reaches_the_handler() -> None:
    caught: list[BaseException] = []
    queue = FakeQueue()
    queue.put(b"a")

    async def handler(job: Job) -> None:
        if job.token == "1":
            queue.recover(job.id)  # the sweep took the lease meanwhile
        try:
            await job.progress(1)
        except StaleJob as error:
            caught.append(error)
            raise

    worker = Worker(queue, handler, block_ms=20)
    async with running(worker):
        await until(lambda: states(queue) == {"1": "completed"})  # claimed again, token 2
    assert [str(error) for error in caught] == ["EMQSTALE job not active"]
    assert worker.counts.lost == 1  # its FAIL with token 1 was stale too: nothing more sent


def test_job_progress_outside_a_worker_says_where_to_go() -> None:
    with pytest.raises(RuntimeError, match="queue.progress"):
        Job("1", b"", "1").progress(1)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_hooks_hear_of_completions_and_failures(kind: str) -> None:
    heard: list[tuple] = []

    def completed(job: Job, result: Any) -> None:
        heard.append(("completed", job.id, result))

    def failed(job: Job, error: BaseException) -> None:
        heard.append(("failed", job.id, type(error).__name__, str(error)))

    async def completed_async(job: Job, result: Any) -> None:
        completed(job, result)

    async def failed_async(job: Job, error: BaseException) -> None:
        failed(job, error)

    async def handler(job: Job) -> Any:
        if job.payload == b"bad":
            raise ValueError("no")
        if job.payload == b"slow":
            await asyncio.sleep(5)
        return {"ok": job.id}

    queue = FakeQueue()
    queue.put(b"good", b"bad", b"slow")
    hooks = (completed, failed) if kind == "sync" else (completed_async, failed_async)
    worker = Worker(queue, handler, block_ms=20, timeout_ms=200, on_completed=hooks[0],
                    on_failed=hooks[1])
    async with running(worker):
        await until(lambda: len(heard) == 3)
    assert sorted(heard) == [("completed", "1", {"ok": "1"}),
                             ("failed", "2", "ValueError", "no"),
                             ("failed", "3", "TimeoutError", "handler ran past 200 ms")]


async def test_hooks_are_not_called_for_lost_leases_or_requeues_and_may_raise(
        caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []

    def completed(job: Job, result: Any) -> None:
        heard.append(job.id)
        raise RuntimeError("hook bug")

    queue = FakeQueue()
    queue.put(b"lost", b"fine", b"held")
    release = asyncio.Event()

    async def handler(job: Job) -> str:
        if job.payload == b"lost":
            queue.recover(job.id)  # the sweep took it back...
            queue.pending.remove(job.id)  # ...and another worker holds it now
        if job.payload == b"held":
            await release.wait()
        return "r"

    worker = Worker(queue, handler, block_ms=20, grace_ms=0, on_completed=completed,
                    on_failed=lambda job, error: heard.append(f"failed {job.id}"))
    with caplog.at_level(logging.ERROR, logger="emqd.worker"):
        async with running(worker):
            await until(lambda: worker.counts.lost == 1 and worker.counts.completed == 1)
            await until(lambda: "3" in worker.running)
    assert heard == ["2"]  # "1" lost its lease, "3" was requeued at the stop
    assert worker.counts.requeued == 1
    assert "job 2: the completed hook raised" in caplog.text
