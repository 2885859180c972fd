"""The client and the worker across a real server restart (issue 25, items 1, 3 and 4).

The server is SIGKILLed and started again on the same port and --dir, with its
append-only file, while handlers report progress and log lines and while a
producer waits for its job. A restart is nobody's failure: no job is charged a
failure, `add_and_wait` goes on waiting (or says which job it was waiting for),
and the worker logs one WARNING when the connection is lost and one when it is
back, however many jobs and retries there were meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TryAgainError

from emqd.client import ConnectionLost, Job, Queue, SyncQueue, Worker
from tests.client.test_worker_e2e import count_stat, wait_async
from tests.support import ServerProcess, start_emqd

pytestmark = pytest.mark.slow

FLAGS = ("--appendonly", "yes", "--appendfsync", "always", "--stalled-interval", "50")
OUTAGE_S = 1.5


def restart(server: ServerProcess, tmp_path: Path) -> ServerProcess:
    """SIGKILL the server, stay away OUTAGE_S, start it again on its port and --dir."""
    server.kill()
    time.sleep(OUTAGE_S)
    return start_emqd(*FLAGS, dir=str(tmp_path), port=server.port)


async def test_a_restart_charges_no_failure_and_logs_one_warning_each_way(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Handlers that never raise, reporting (progress, log, children) while the server is
    away: every job completes with no failure spent, and the outage is two WARNING lines."""
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    caplog.set_level(logging.DEBUG, logger="emqd.worker")
    try:
        async with Queue("restart", f"redis://127.0.0.1:{server.port}") as queue:
            ids = await queue.add_many([b"%d" % n for n in range(8)])

            async def handler(job: Job) -> str:
                for step in range(12):
                    await job.progress(step)
                    await job.log(f"step {step}")
                    assert await job.children() == []
                    await asyncio.sleep(0.25)
                return "done"

            worker = Worker(queue, handler, concurrency=8, lease_ms=6000, block_ms=100)
            task = asyncio.create_task(worker.run())
            try:
                await wait_async(lambda: count_stat(queue, "active"), 8, 5)
                await asyncio.sleep(0.3)
                server = await asyncio.to_thread(restart, server, tmp_path)
                await wait_async(lambda: count_stat(queue, "completed"), 8, 30)
            finally:
                worker.stop()
                await asyncio.wait_for(task, 10)
            for job_id in ids:
                row = await queue.get(job_id)
                assert (row.state, row.failures, row.stalled, row.result) == (
                    "completed", 0, 0, b"done"), row
            assert worker.counts.failed == worker.counts.lost == 0
            assert worker.counts.completed == 8
    finally:
        server.stop()
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "emqd.worker" and r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "connection lost" in warnings[0] and "back" in warnings[1], warnings


async def test_add_and_wait_goes_on_waiting_across_a_restart(tmp_path: Path) -> None:
    """The job is added, the server restarts while the producer waits, a worker completes
    the job afterwards: add_and_wait answers its result, and only one job was made."""
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    url = f"redis://127.0.0.1:{server.port}"
    try:
        async with Queue("rpc", url) as producer:
            waiting = asyncio.create_task(producer.add_and_wait(b"ping", timeout_ms=20_000))
            await wait_async(lambda: count_stat(producer, "pending"), 1, 5)
            server = await asyncio.to_thread(restart, server, tmp_path)
            async with Queue("rpc", url) as consumer:  # a claim is not retried: a new queue
                jobs = await consumer.claim(5000)
                assert len(jobs) == 1
                await consumer.complete(jobs[0], b"pong")
                assert await asyncio.wait_for(waiting, 15) == b"pong"
                assert (await consumer.stats()).completed_total == 1
    finally:
        server.stop()


def test_a_wait_that_cannot_reconnect_says_which_job(tmp_path: Path) -> None:
    """The server does not come back within the client's patience: the error carries the
    job's id (and says the job was added), so the caller can wait for it again."""
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    url = f"redis://127.0.0.1:{server.port}"
    try:
        queue = SyncQueue("rpc", url, reconnect_s=1.0)
        job_id = queue.add(b"first")  # the connection is made
        server.kill()
        with pytest.raises(ConnectionLost) as lost:
            queue.add_and_wait(b"ping", timeout_ms=10_000)
        assert lost.value.job_id and lost.value.job_id != job_id
        assert lost.value.added is False  # the ADD itself never got through
        server = start_emqd(*FLAGS, dir=str(tmp_path), port=server.port)
        assert queue.get(lost.value.job_id) is None
        queue.add(b"again", id=lost.value.job_id)
        with pytest.raises(ConnectionLost) as waiting:
            server.kill()
            queue.wait(lost.value.job_id, 10_000)
        assert (waiting.value.job_id, waiting.value.added) == (lost.value.job_id, True)
        queue.close()
    finally:
        server.stop()


@pytest.mark.parametrize("lost", [
    RedisConnectionError("the reply was lost"),
    # a cluster's front: the cluster did not acknowledge the write, which may or may not
    # have been applied (docs/CLUSTER.md, how a client retries)
    TryAgainError("the cluster did not acknowledge this write"),
])
def test_a_retried_add_makes_one_job(tmp_path: Path, lost: Exception) -> None:
    """An ADD whose reply is lost (or not acknowledged) is sent again by the client with
    the id it picked before the first try: the server answers the existing job, so one
    job exists (issue 24, 11)."""
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    url = f"redis://127.0.0.1:{server.port}"
    try:
        queue = SyncQueue("once", url)
        real = queue.client.execute_command
        calls = []

        def lose_first_reply(*argv: object, **options: object) -> object:
            reply = real(*argv, **options)  # applied, but its answer does not arrive
            calls.append(argv)
            if len(calls) == 1:
                raise lost
            return reply

        queue.client.execute_command = lose_first_reply  # type: ignore[method-assign]
        job_id = queue.add(b"hello")
        queue.client.execute_command = real  # type: ignore[method-assign]
        assert len(calls) == 2 and calls[0] == calls[1]  # the same ADD, with its ID
        assert queue.stats().pending == 1
        assert queue.get(job_id).payload == b"hello"
        queue.close()
    finally:
        server.stop()
