"""A Worker whose front is killed (SIGKILL) goes on through another front: within the
fronts' lease and two seconds it finishes jobs again, and at the end every job ran once.

The Worker is given the owner's address alone and learns the other front from it
(EMQ.FRONTS). When the owner dies, its connections fail; the worker passes that front
over, probes the other and sends everything there, which takes the queue once the
dead owner's lease ran out. A cluster of its own (conftest.py's, one a module): the
killed front stays in the registry for a while.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis

from emqd.client import Job, Queue, SyncQueue, Worker
from tests.cluster.support import Cluster, name_for, owner_and_other, start_fronts, until

LEASE_MS = 2000  # the fronts' lease on a queue
JOB_LEASE_MS = 10_000  # the worker's on a job: longer than the move takes
JOBS = 600
KILL_AFTER = 150  # jobs completed before the owner is killed


async def test_a_worker_whose_front_is_killed_resumes_on_another_within_the_lease(
        cluster: Cluster) -> None:
    fronts = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    try:
        name = name_for(fronts, "survivor")
        with SyncQueue(name, f"redis://127.0.0.1:{fronts[0].port}") as producer:
            ids = producer.add_many([b"job %d" % n for n in range(JOBS)])
        owner, other = owner_and_other(fronts, name)
        ran: list[str] = []
        completed: list[tuple[float, str]] = []

        async def handler(job: Job) -> None:
            ran.append(job.id)
            await asyncio.sleep(0.01)

        queue = Queue(name, f"redis://127.0.0.1:{owner.port}")  # the owner alone
        worker = Worker(queue, handler, concurrency=5, lease_ms=JOB_LEASE_MS, block_ms=500,
                        on_completed=lambda job, _: completed.append((time.monotonic(), job.id)))
        running = asyncio.ensure_future(worker.run())
        try:
            await asyncio.wait_for(_until(lambda: len(completed) >= KILL_AFTER), 30)
            owner.kill()  # SIGKILL
            killed_at = time.monotonic()
            await asyncio.wait_for(_until(lambda: completed[-1][0] > killed_at), 15)
            resumed_s = next(at for at, _ in completed if at > killed_at) - killed_at
            assert resumed_s <= LEASE_MS / 1000 + 2, resumed_s
            # Jobs whose claim the dead owner answered but whose reply was lost come back
            # once their job lease runs out (uncounted, as after a restart).
            await asyncio.wait_for(_until(lambda: len(completed) >= JOBS),
                                   JOB_LEASE_MS / 1000 + 20)
        finally:
            worker.stop()
            await asyncio.wait_for(running, 20)
            await queue.aclose()
        assert sorted(ran) == sorted(set(ran)) == sorted(ids)  # each job ran once
        assert sorted(job_id for _, job_id in completed) == sorted(ids)

        def finished() -> bool:
            with redis.Redis(port=other.port) as client:
                stats = client.execute_command("EMQ.STATS", name)
            return bool(stats[b"completed_total"] == JOBS)
        until(finished, 10, "every job completed once, as the cluster holds it")
    finally:
        for server in fronts:
            server.stop()


async def _until(condition: Callable[[], bool], pause: float = 0.02) -> None:
    """Wait for `condition` (the caller bounds the wait: asyncio.wait_for)."""
    while not condition():
        await asyncio.sleep(pause)
