"""The worker against a real emqd: chaos with a killed worker, graceful shutdown, heartbeat,
and a server restart.

Worker processes are `python -m emqd.client` subprocesses started here and
stopped by PID; every wait has a deadline (`wait_for`), so a failure is a
failed assertion, never a hung suite.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import TryAgainError

from emqd.client import Job, Queue, StaleJob, SyncQueue, Worker
from emqd.client.connection import Connection
from emqd.client.errors import TRANSPORT_ERRORS
from tests.support import ROOT, ServerProcess, scratch, start_emqd


def generated(port: int, queue: str, payload: bytes) -> str:
    """A job added with an id the server generates, whose first token is 1 (the client
    names every job it adds, and a named job's tokens start above the queue's floor:
    PROTOCOL.md 6.1): these tests count the claims of a job by its token."""
    with redis.Redis(port=port) as client:
        return client.execute_command("EMQ.ADD", queue, payload).decode()

pytestmark = pytest.mark.slow

JOBS = 2000
MAX_ATTEMPTS = 3
MAX_STALLED = 2


def wait_for(condition: Callable[[], bool], timeout: float, what: str,
              interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class WorkerProcess:
    """`python -m emqd.client` in its own session, logging to a temp file."""

    def __init__(self, handler: str, queue: str, port: int, *flags: str,
                 env: dict[str, str] | None = None) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="worker-", suffix=".log", delete=False,
                                               dir=scratch())
        full_env = {**os.environ, **(env or {}),
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "emqd.client", handler, "--queue", queue,
             "--url", f"redis://127.0.0.1:{port}", *flags],
            cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.mark.timeout(120)
def test_chaos_two_workers_one_killed_every_job_ends_right(
        workers: list[WorkerProcess], tmp_path: Path) -> None:
    server = start_emqd("--stalled-interval", "100", "--max-stalled", str(MAX_STALLED),
                        "--max-attempts", str(MAX_ATTEMPTS), "--keep-completed", "100000",
                        "--backoff", "fixed:20")
    try:
        queue = SyncQueue("chaos", f"redis://127.0.0.1:{server.port}")
        ids = queue.add_many([b"job %d" % n for n in range(JOBS)])
        flags = ("--concurrency", "20", "--lease-ms", "600", "--timeout-ms", "300",
                 "--grace-ms", "500", "--progress-interval", "1")
        env = {"EMQD_E2E_LOG": str(tmp_path)}
        victim = WorkerProcess("tests.client.e2e_handlers:chaos", "chaos", server.port,
                               *flags, env=env)
        survivor = WorkerProcess("tests.client.e2e_handlers:chaos_sync", "chaos", server.port,
                                 *flags, env=env)
        workers += [victim, survivor]

        def finished() -> int:
            stats = queue.stats()
            return stats.completed + stats.dead

        wait_for(lambda: finished() >= JOBS // 3, 40, "a third of the jobs")
        victim.signal(signal.SIGKILL)
        wait_for(lambda: finished() == JOBS, 60, "every job to finish")

        stats = queue.stats()
        assert (stats.pending, stats.active, stats.scheduled) == (0, 0, 0)
        assert stats.completed + stats.dead == JOBS
        assert stats.completed_total == stats.completed  # no job completed twice
        assert stats.failed_total == stats.dead

        rows = {job_id: queue.get(job_id) for job_id in ids}
        completed = {i: row for i, row in rows.items() if row.state == "completed"}
        dead = {i: row for i, row in rows.items() if row.state == "dead"}
        assert len(completed) == stats.completed and len(dead) == stats.dead
        # Each COMPLETE came from the holder of the current token.
        for row in completed.values():
            token, _pid = row.result.decode().split()
            assert int(token) == row.attempts
        for job_id, row in dead.items():
            at_cap = row.failures == MAX_ATTEMPTS
            stalled_out = row.stalled == MAX_STALLED and row.last_error == "stalled"
            assert at_cap or stalled_out, (job_id, row.fields)
        # Some runs timed out, some failed, and the victim's leases were recovered.
        errors = {row.last_error for row in rows.values() if row.last_error}
        assert "timeout" in errors and any(e.startswith("ValueError") for e in errors)
        assert any(row.stalled >= 1 for row in rows.values())

        # A stale holder's COMPLETE is refused: replay one superseded run's token.
        runs = [line.split() for log in tmp_path.glob("*.log")
                for line in log.read_text().splitlines()]
        ran = {(job_id, token) for job_id, token, _pid in runs}
        assert all((i, str(row.attempts)) in ran for i, row in completed.items())
        stale = next((job_id, token) for job_id, token, _pid in runs
                     if int(token) < rows[job_id].attempts and job_id in completed)
        with pytest.raises(StaleJob, match="token mismatch"):
            queue.complete(Job(stale[0], b"", stale[1]), "late")
        assert queue.stats().completed_total == stats.completed_total

        survivor.signal(signal.SIGTERM)
        assert survivor.proc.wait(10) == 0, survivor.output()
        assert "done=" in survivor.output() and "rate=" in survivor.output()
        queue.close()
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_sigterm_requeues_unfinished_jobs_and_exits_0_within_grace(
        workers: list[WorkerProcess]) -> None:
    server = start_emqd()
    try:
        queue = SyncQueue("graceful", f"redis://127.0.0.1:{server.port}")
        slow = [generated(server.port, "graceful", b'{"sleep": 30}') for _ in range(2)]
        quick = generated(server.port, "graceful", b'{"sleep": 0.3}')
        worker = WorkerProcess("tests.client.e2e_handlers:sleepy", "graceful", server.port,
                               "--grace-ms", "1500", "--concurrency", "5")
        workers.append(worker)
        wait_for(lambda: queue.stats().active == 3, 10, "all three jobs claimed")
        started = time.monotonic()
        worker.signal(signal.SIGTERM)
        assert worker.proc.wait(10) == 0, worker.output()
        assert time.monotonic() - started < 1.5 + 1.0
        assert "Warning" not in worker.output()  # the worker's and its lease keeper's stderr
        assert queue.get(quick).state == "completed"
        for job_id in slow:
            row = queue.get(job_id)
            assert (row.state, row.attempts, row.failures) == ("pending", 1, 0)
        stats = queue.stats()
        assert (stats.pending, stats.active, stats.completed) == (2, 0, 1)
        queue.close()
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_a_worker_killed_holding_batches_loses_no_job(workers: list[WorkerProcess]) -> None:
    """SIGKILL while the worker holds 20 jobs claimed in batches: the sweep brings every
    one of them back (its first stall: counted, not a failure) and a second worker
    completes all 40, none twice."""
    server = start_emqd("--stalled-interval", "100", "--max-stalled", "2")
    try:
        queue = SyncQueue("killed", f"redis://127.0.0.1:{server.port}")
        ids = [generated(server.port, "killed", b'{"sleep": 30}') for _ in range(40)]
        victim = WorkerProcess("tests.client.e2e_handlers:sleepy", "killed", server.port,
                               "--concurrency", "20", "--lease-ms", "600")
        workers.append(victim)
        wait_for(lambda: queue.stats().active == 20, 15, "20 jobs held")
        victim.signal(signal.SIGKILL)
        wait_for(lambda: queue.stats().stalled_total == 20 and queue.stats().active == 0, 15,
                 "the sweep to bring the 20 back")
        survivor = WorkerProcess("tests.client.e2e_handlers:quick", "killed", server.port,
                                 "--concurrency", "20")
        workers.append(survivor)
        wait_for(lambda: queue.stats().completed_total == 40, 20, "every job completed")
        rows = [queue.get(job_id) for job_id in ids]
        assert sorted(row.stalled for row in rows) == [0] * 20 + [1] * 20
        assert all(row.state == "completed" and row.failures == 0 for row in rows)
        assert all(row.attempts == 1 + row.stalled for row in rows)  # none run twice after
        stats = queue.stats()
        assert (stats.dead, stats.failures_total, stats.completed_total) == (0, 0, 40)
        queue.close()
    finally:
        server.stop()


@pytest.fixture
def sweeping_server() -> Iterator[ServerProcess]:
    server = start_emqd("--stalled-interval", "50")
    yield server
    server.stop()


async def test_heartbeat_keeps_a_long_handler_from_being_swept(
        sweeping_server: ServerProcess) -> None:
    url = f"redis://127.0.0.1:{sweeping_server.port}"
    async with Queue("beat", url) as queue:
        # Control: a lease nobody extends is swept (so the sweep runs in this setup).
        await queue.add(b"abandoned")
        [abandoned] = await queue.claim(300)
        await wait_async(lambda: _state(queue, abandoned.id), "pending", 3)
        assert (await queue.get(abandoned.id)).stalled == 1
        await queue.remove(abandoned.id)

        job_id = generated(sweeping_server.port, "beat", b"long")

        async def handler(job: Job) -> str:
            await asyncio.sleep(0.9)  # three times the lease
            return "finished"

        worker = await _work_until_completed(queue, job_id, handler, 5, lease_ms=300,
                                             block_ms=50)
        row = await queue.get(job_id)
        assert (row.attempts, row.stalled, row.result) == (1, 0, b"finished")
        assert worker.counts.lost == 0 and worker.counts.completed == 1


async def test_worker_survives_a_server_restart(caplog: pytest.LogCaptureFixture) -> None:
    """Without persistence the restarted server has forgotten the jobs in flight: their
    leases answer EMQSTALE (logged once each, nothing retried) and the worker goes on
    with the jobs added after the restart."""
    server = start_emqd()
    port = server.port
    try:
        async with Queue("restart", f"redis://127.0.0.1:{port}") as queue:
            await queue.add_many([b"before"] * 4)
            gate = asyncio.Event()

            async def handler(job: Job) -> str:
                if job.payload == b"before":
                    await gate.wait()
                return job.token

            worker = Worker(queue, handler, concurrency=4, lease_ms=600, block_ms=100)
            task = asyncio.create_task(worker.run())
            try:
                await wait_async(lambda: count_stat(queue, "active"), 4, 5)
                server.kill()
                await asyncio.sleep(0.3)
                server = start_emqd(port=port)
                gate.set()
                # Every old run is dropped before new jobs (with the same ids!) arrive.
                await wait_async(lambda: _value(worker.counts.lost), 4, 5)
                after = [generated(port, "restart", b"after") for _ in range(6)]
                await wait_async(lambda: count_stat(queue, "completed"), 6, 10)
            finally:
                worker.stop()
                await asyncio.wait_for(task, 5)
            assert worker.counts.reconnects >= 1 and worker.counts.lost == 4
            assert worker.counts.completed == 6
            for job_id in after:
                assert (await queue.get(job_id)).result == b"1"
            lost_lines = [r for r in caplog.records if "lease lost" in r.getMessage()]
            assert len(lost_lines) == 4
    finally:
        server.stop()


async def test_a_front_s_tryagain_is_waited_out_by_the_claim_and_the_complete(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster front answers TRYAGAIN while the cluster cannot take a write
    (docs/CLUSTER.md, how a client should retry): the worker backs off and sends its
    CLAIM and its COMPLETE again, and the job completes once, in one attempt."""
    server = start_emqd()
    try:
        async with Queue("again", f"redis://127.0.0.1:{server.port}") as queue:
            job_id = generated(server.port, "again", b"work")
            real = Connection.send
            refused: list[str] = []

            def refuse_each_verb_once(self: Connection, requests: list[bytes]) -> Any:
                for verb in ("EMQ.CLAIM", "EMQ.COMPLETE"):
                    if verb not in refused and any(verb.encode() in r for r in requests):
                        refused.append(verb)  # not sent: the front refused it
                        answered = asyncio.get_running_loop().create_future()
                        answered.set_result(
                            [TryAgainError("the cluster did not acknowledge this write")]
                            * len(requests))
                        return answered
                return real(self, requests)

            monkeypatch.setattr(Connection, "send", refuse_each_verb_once)

            async def handler(job: Job) -> str:
                return "done"

            worker = await _work_until_completed(queue, job_id, handler, 10, lease_ms=5000,
                                                 block_ms=50)
            assert refused == ["EMQ.CLAIM", "EMQ.COMPLETE"]
            row = await queue.get(job_id)
            assert (row.attempts, row.stalled, row.result) == (1, 0, b"done")
            assert worker.counts.completed == 1 and worker.counts.lost == 0
            retried = [r.getMessage() for r in caplog.records if "TRYAGAIN" in r.getMessage()
                       or "did not acknowledge" in r.getMessage()]
            assert len(retried) >= 2, retried
    finally:
        server.stop()


async def _work_until_completed(queue: Queue, job_id: str, handler: Callable, timeout: float,
                                **options: Any) -> Worker:
    """Run a Worker with `handler` until job `job_id` is completed (within `timeout`),
    then stop it; the stopped worker, for its counts."""
    worker = Worker(queue, handler, **options)
    task = asyncio.create_task(worker.run())
    try:
        await wait_async(lambda: _state(queue, job_id), "completed", timeout)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 5)
    return worker


async def _state(queue: Queue, job_id: str) -> str:
    return (await queue.get(job_id)).state


async def count_stat(queue: Queue, field: str) -> int:
    """A STATS count, or -1 while the server is away."""
    try:
        return getattr(await queue.stats(), field)
    except TRANSPORT_ERRORS:
        return -1


async def _value(value: object) -> object:
    return value


async def wait_async(read: Callable, expected: object, timeout: float) -> None:
    """Poll `await read()` until it equals `expected` (or satisfies it, if callable)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await read()
        if expected(value) if callable(expected) else value == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout}s")
        await asyncio.sleep(0.02)



def hold_the_gil_in_c(seconds: float) -> None:
    """libc's usleep called through ctypes.PyDLL, which keeps the GIL during the call:
    no Python thread of this process runs meanwhile, the event loop included."""
    libc = ctypes.PyDLL(None)
    libc.usleep(int(seconds * 1_000_000))


async def test_a_handler_holding_the_gil_in_c_keeps_its_lease(
        sweeping_server: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    """Held three leases long in C: the worker's own heartbeats cannot run, its lease
    keeper (emqd/client/lease_keeper.py, a process of its own) extends the lease, and the job
    completes in its first run. Its neighbour, not held, completes too."""
    url = f"redis://127.0.0.1:{sweeping_server.port}"
    async with Queue("gil", url) as queue:
        held = generated(sweeping_server.port, "gil", b"hold")
        other = generated(sweeping_server.port, "gil", b"free")

        def handler(job: Job) -> str:
            if job.payload == b"hold":
                hold_the_gil_in_c(1.8)
            return "done"

        worker = Worker(queue, handler, concurrency=2, lease_ms=600, block_ms=50)
        task = asyncio.create_task(worker.run())
        try:
            await wait_async(lambda: _state(queue, held), "completed", 15)
            await wait_async(lambda: _state(queue, other), "completed", 5)
        finally:
            worker.stop()
            await asyncio.wait_for(task, 5)
        row = await queue.get(held)
    assert (row.attempts, row.stalled, row.result) == (1, 0, b"done")
    assert worker.counts.lost == 0 and worker.counts.completed == 2
