"""A worker across a SIGKILLed server that reloads its append-only file (section 9)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from emqd.client import Job, Queue, Worker
from tests.client.test_worker_e2e import count_stat, wait_async
from tests.support import start_emqd

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("lease_ms", "handler_s", "away_s"), [(450, 0.5, 0.6), (3000, 1.5, 1.2)],
                         ids=["leases-recovered-while-away", "leases-survive"])
async def test_a_persistent_restart_never_runs_one_job_twice_at_once(
        tmp_path: Path, lease_ms: int, handler_s: float, away_s: float) -> None:
    """With the append-only file the jobs survive a SIGKILLed server; the worker's leases
    either survive the outage (re-extended before any new claim) or were recovered
    (EMQSTALE, dropped): either way no job ever runs twice at once here, and none is
    completed twice.

    The server stays away `away_s`: longer than a lease in the first case, and in
    both longer than a heartbeat's interval (a third of the lease), so the worker
    meets the outage. A shorter one can fall between two heartbeats, and redis-py
    replaces a pooled connection that died while idle without a word: the worker
    would never know the server had gone (and `reconnects` would stay 0)."""
    flags = ("--appendonly", "yes", "--appendfsync", "always", "--stalled-interval", "50")
    server = start_emqd(*flags, dir=str(tmp_path))
    port = server.port
    spans: list[tuple[str, str, float, float]] = []
    try:
        async with Queue("restart", f"redis://127.0.0.1:{port}") as queue:
            ids = await queue.add_many([b"%d" % n for n in range(12)])

            async def handler(job: Job) -> str:
                started = time.monotonic()
                try:
                    await asyncio.sleep(handler_s)
                finally:
                    spans.append((job.id, job.token, started, time.monotonic()))
                return job.token

            worker = Worker(queue, handler, concurrency=4, lease_ms=lease_ms, block_ms=100)
            task = asyncio.create_task(worker.run())
            try:
                await wait_async(lambda: count_stat(queue, "active"), 4, 5)
                server.kill()
                await asyncio.sleep(away_s)
                server = start_emqd(*flags, dir=str(tmp_path), port=port)
                await wait_async(lambda: count_stat(queue, "completed"), 12, 20)
            finally:
                worker.stop()
                await asyncio.wait_for(task, 5)
            stats = await queue.stats()
            assert stats.completed_total == stats.completed == 12
            assert worker.counts.reconnects >= 1
            for job_id in ids:
                row = await queue.get(job_id)
                assert row.result == str(row.attempts).encode()
                assert row.stalled == 0  # a restart is not the worker's fault
            if lease_ms > 2000:
                assert worker.counts.lost == 0  # every lease outlived the outage
    finally:
        server.stop()
    by_job: dict[str, list[tuple[float, float]]] = {}
    for job_id, _token, started, ended in spans:
        by_job.setdefault(job_id, []).append((started, ended))
    for job_id, runs in by_job.items():
        runs.sort()
        for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
            assert start >= end, f"job {job_id} ran twice at once: {runs}"
