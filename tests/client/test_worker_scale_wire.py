"""The Worker at 1,000 slots through a real emqd: no pool error, no warning storm, no
lease lost, and two connections whatever the concurrency.

Issue 36: at 1,000 slots with a 50 ms handler the redis-py worker printed 106
pool errors and 232 "lease lost" lines for 5,000 jobs. Here every job outlives
its lease (so only the heartbeats keep them), the async and the plain handler
alike, and the worker must end with every job completed in one attempt, nothing
lost, nothing logged above INFO, and at most two connections named after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest
import redis

from emqd.client import Job, Queue, Worker

pytestmark = pytest.mark.slow

SLOTS = 1000
JOBS = 3000
LEASE_MS = 600
RUN_S = 0.8  # longer than the lease: only the heartbeats keep each job


def _handlers() -> dict[str, Callable[[Job], object]]:
    async def sleeps_async(job: Job) -> str:
        await asyncio.sleep(RUN_S)
        return job.token

    def sleeps_sync(job: Job) -> str:
        time.sleep(RUN_S)
        return job.token

    return {"async": sleeps_async, "sync": sleeps_sync}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_thousand_slots_lose_no_lease_and_open_two_connections(
        emqd_port: int, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{emqd_port}"
    async with Queue("wide", url) as queue:
        ids = await queue.add_many([b"x"] * JOBS)
        worker = Worker(queue, _handlers()[kind], concurrency=SLOTS, lease_ms=LEASE_MS,
                        block_ms=100)
        peak_connections = 0
        with caplog.at_level(logging.DEBUG, logger="emqd"):
            task = asyncio.create_task(worker.run())
            try:
                deadline = time.monotonic() + 60
                while (await queue.stats()).completed_total < JOBS:
                    assert time.monotonic() < deadline, await queue.stats()
                    assert not task.done(), task
                    with redis.Redis(port=emqd_port) as admin:
                        named = [c for c in admin.client_list()
                                 if c["name"].startswith("emqd-worker?")]
                    peak_connections = max(peak_connections, len(named))
                    await asyncio.sleep(0.05)
            finally:
                worker.stop()
                await asyncio.wait_for(task, 10)
        stats = await queue.stats()
        last = await queue.get(ids[-1])
    assert worker.counts.completed == JOBS and worker.counts.claimed == JOBS  # none twice
    assert worker.counts.lost == 0 and worker.counts.failed == 0
    assert (stats.completed_total, stats.stalled_total, stats.failures_total) == (JOBS, 0, 0)
    assert (last.state, last.stalled, last.failures) == ("completed", 0, 0)
    assert 1 <= peak_connections <= 2
    ours = [r for r in caplog.records if r.name.startswith("emqd")]
    assert [r.getMessage() for r in ours if r.levelno > logging.INFO] == []
    assert not any("onnection" in r.getMessage() for r in ours)  # no retry, no pool error
