"""The plain handlers' threads (emqd/client/handler.py `Threads`): a blocking handler holds
only its own thread, the pool grows only as runs wait for a thread, and every
result or exception reaches the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from emqd.client.commands import Job
from emqd.client.handler import Done, Threads


class Run:
    context = None  # not traced

    def __init__(self, job_id: str) -> None:
        self.job = Job(job_id, job_id.encode(), "1")


async def test_a_blocking_handler_holds_only_its_thread_and_results_reach_the_loop() -> None:
    release = threading.Event()
    ran_on: set[str] = set()

    def handler(job: Job) -> Any:
        ran_on.add(threading.current_thread().name)
        if job.id == "stuck":
            release.wait(10)
        if job.id == "bad":
            raise ValueError("no")
        return job.id

    delivered: list[Done] = []
    done = asyncio.Event()

    def deliver(batch: list[Done]) -> None:
        delivered.extend(batch)
        if len(delivered) >= 21:
            done.set()

    threads = Threads(handler, asyncio.get_running_loop(), deliver)
    try:
        threads.submit(Run("stuck"))
        for n in range(19):
            threads.submit(Run(str(n)))
        threads.submit(Run("bad"))
        deadline = time.monotonic() + 5
        while len(delivered) < 20:  # all but the stuck one, which holds one thread only
            assert time.monotonic() < deadline, delivered
            await asyncio.sleep(0.01)
        assert "stuck" not in {run.job.id for run, _, _ in delivered}
        release.set()
        await asyncio.wait_for(done.wait(), 5)
    finally:
        release.set()
        threads.close()
    results = {run.job.id: (value, error) for run, value, error in delivered}
    assert results["7"] == ("7", None) and results["stuck"] == ("stuck", None)
    value, error = results["bad"]
    assert value is None and isinstance(error, ValueError)
    assert len(threads.threads) <= 21 and threads.occupied == 0
    assert all(name.startswith("emqd-handler-") for name in ran_on)


async def test_the_pool_grows_only_while_runs_wait_for_a_thread() -> None:
    delivered: list[Done] = []
    threads = Threads(lambda job: None, asyncio.get_running_loop(), delivered.extend)
    try:
        for round_ in range(5):
            threads.submit(Run(str(round_)))
            deadline = time.monotonic() + 5
            while len(delivered) <= round_:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
        assert len(threads.threads) == 1  # one job at a time: one thread, reused
    finally:
        threads.close()
