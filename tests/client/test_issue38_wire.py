"""Issue 38's client and worker against a real emqd: cancel a running handler (async and
plain), snooze, debounce, and the metrics history as `Queue.metrics` reads it.

The Worker runs in the test's loop; every wait is bounded (`until`), so a failure is a
failed assertion, never a hung suite.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from emqd.client import Job, JobCancelled, Queue, Snooze, SyncQueue, Worker
from tests.support import start_emqd

LEASE_MS = 600  # the heartbeat (an EXTEND every 200 ms) learns of a cancel


@pytest.fixture
async def queue(emqd_port: int, request: pytest.FixtureRequest) -> AsyncIterator[Queue]:
    async with Queue(request.node.name[:60], f"redis://127.0.0.1:{emqd_port}") as q:
        yield q


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_cancelling_a_running_async_handler_cancels_its_task(queue: Queue) -> None:
    started, cancelled = asyncio.Event(), []

    async def handler(job: Job) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise
        return "never"

    worker = Worker(queue, handler, lease_ms=LEASE_MS, block_ms=50)
    running = asyncio.create_task(worker.run())
    try:
        job_id = await queue.add(b"export 2024")
        await asyncio.wait_for(started.wait(), 10)
        assert await queue.cancel(job_id, reason="the user closed the tab") == "active"
        await until(lambda: cancelled == [job_id], "the handler's task to be cancelled")
        await until(lambda: worker.counts.cancelled == 1, "the worker to count it")
    finally:
        worker.stop()
        counts = await asyncio.wait_for(running, 10)
    assert (counts.completed, counts.failed, counts.lost) == (0, 0, 0)
    info = await queue.get(job_id)
    assert info is not None and (info.state, info.failures) == ("cancelled", 0)
    finished = await queue.wait(job_id, 1000)
    assert finished is not None and finished.cancelled
    assert finished.error == "the user closed the tab"
    with pytest.raises(JobCancelled, match="the user closed the tab"):
        await queue.add_and_wait(b"x", id=job_id, timeout_ms=1000)


async def test_a_plain_handler_polls_job_cancelled_and_its_result_is_dropped(
        queue: Queue) -> None:
    started, seen = threading.Event(), []

    def handler(job: Job) -> str:
        started.set()
        deadline = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(job.cancelled)
        return "too late"

    worker = Worker(queue, handler, lease_ms=LEASE_MS, block_ms=50)
    running = asyncio.create_task(worker.run())
    try:
        job_id = await queue.add(b"export 2025")
        await until(started.is_set, "the handler to start")
        assert await queue.cancel(job_id) == "active"
        await until(lambda: seen == [True], "the handler to see job.cancelled")
    finally:
        worker.stop()
        counts = await asyncio.wait_for(running, 10)
    assert (counts.cancelled, counts.completed, counts.failed) == (1, 0, 0)
    info = await queue.get(job_id)
    assert info is not None and info.state == "cancelled" and info.result is None


async def test_a_report_of_a_cancelled_job_raises_job_cancelled_in_the_handler(
        queue: Queue) -> None:
    raised: list[BaseException] = []
    cancelled = threading.Event()

    def handler(job: Job) -> None:
        assert cancelled.wait(10)
        try:
            job.progress(50)
        except JobCancelled as error:
            raised.append(error)

    worker = Worker(queue, handler, lease_ms=60000, block_ms=50)  # no heartbeat meanwhile
    running = asyncio.create_task(worker.run())
    try:
        job_id = await queue.add(b"x")
        await until(lambda: worker.counts.claimed == 1, "the claim")
        await queue.cancel(job_id, reason="enough")
        cancelled.set()
        await until(lambda: len(raised) == 1, "the report to be refused")
    finally:
        worker.stop()
        counts = await asyncio.wait_for(running, 10)
    assert "enough" in str(raised[0]) and counts.cancelled == 1 and counts.failed == 0


async def test_snoozing_twice_then_completing_spends_no_failure(queue: Queue) -> None:
    runs: list[Job] = []

    async def handler(job: Job) -> str:
        runs.append(job)
        if len(runs) <= 2:
            raise Snooze(0.05)
        return "done"

    worker = Worker(queue, handler, lease_ms=5000, block_ms=50)
    running = asyncio.create_task(worker.run())
    try:
        job_id = await queue.add(b"rate limited downstream")
        finished = await queue.wait(job_id, 10000)
    finally:
        worker.stop()
        counts = await asyncio.wait_for(running, 10)
    assert finished is not None and finished.completed and finished.result == b"done"
    assert [job.failures for job in runs] == [0, 0, 0]
    tokens = [int(job.token) for job in runs]
    assert tokens == [tokens[0], tokens[0] + 1, tokens[0] + 2]  # attempts rose each time
    info = await queue.get(job_id)
    assert info is not None and (info.failures, info.attempts) == (0, tokens[-1])
    assert (counts.snoozed, counts.completed, counts.failed) == (2, 1, 0)
    stats = await queue.stats()
    assert (stats.failures_total, stats.retried_total) == (0, 0)


async def test_ten_adds_in_100_ms_debounce_into_one_job_with_the_last_payload(
        queue: Queue) -> None:
    ids = []
    for n in range(10):
        ids.append(await queue.add(f"text {n}", unique="box-7", delay_ms=300, replace=True,
                                   extend=True))
        await asyncio.sleep(0.01)
    assert len(set(ids)) == 1
    verdict = await queue.add_unique("text 10", "box-7", delay_ms=300, extend=True)
    assert (verdict.id, verdict.added, verdict.verdict) == (ids[0], False, "extended")
    ran: list[bytes] = []

    async def handler(job: Job) -> bytes:
        ran.append(job.payload)
        return job.payload

    worker = Worker(queue, handler, block_ms=50)
    running = asyncio.create_task(worker.run())
    try:
        finished = await queue.wait(ids[0], 10000)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    assert finished is not None and finished.result == b"text 9"
    assert ran == [b"text 9"]
    assert (await queue.stats()).added_total == 1


def test_metrics_reads_the_closed_minutes_of_the_history(tmp_path: Path) -> None:
    """A clean shutdown closes the minute in progress (PROTOCOL.md 22.5): after a restart
    the history holds the jobs completed and failed, with their wait and run times."""
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        with SyncQueue("mail", f"redis://127.0.0.1:{server.port}") as mail:
            assert mail.metrics() == []
            mail.add_many([b"a", b"b", b"c"])
            for n, job in enumerate(mail.claim(30000, count=3)):
                if n < 2:
                    mail.complete(job)
                else:
                    mail.fail(job, "boom", max_attempts=1)
        server.stop()
        server.restart()
        with SyncQueue("mail", f"redis://127.0.0.1:{server.port}") as mail:
            minutes = mail.metrics()
            assert sum(m.completed for m in minutes) == 2
            assert (sum(m.failures for m in minutes), sum(m.dead for m in minutes)) == (1, 1)
            assert all(m.wait_p50 is not None and m.wait_p99 is not None for m in minutes)
            assert any(m.run_p50 is not None for m in minutes)
            last = minutes[-1].minute
            assert mail.metrics(from_ms=last + 1) == []
            assert mail.metrics(from_ms=last, to_ms=last) == [minutes[-1]]
    finally:
        server.stop()
