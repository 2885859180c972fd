"""`emqd-worker --processes N` against a real emqd: each process on the dashboard's Workers
page, a killed one started again, one SIGTERM stopping all, and no child outliving
its supervisor.

The supervisor is a subprocess started here and stopped by PID; its children are
found through /proc; every wait has a deadline (`wait_for`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from emqd.client import SyncQueue
from tests.client.test_worker_e2e import WorkerProcess, generated, wait_for
from tests.http.web import Web
from tests.support import ServerProcess, start_emqd

pytestmark = pytest.mark.slow

FLAGS = ("--processes", "2", "--concurrency", "2", "--lease-ms", "1500", "--grace-ms", "300",
         "--progress-interval", "0")


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    server = start_emqd("--stalled-interval", "100", http=True)
    yield server
    server.stop()


@pytest.fixture
def supervised() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        kids = children(worker.proc.pid)
        worker.stop()
        for kid in kids:  # a child that outlived a failed test
            if alive(kid):
                os.kill(kid, signal.SIGKILL)


@pytest.mark.timeout(60)
def test_each_process_is_a_worker_a_dead_one_is_restarted_one_sigterm_stops_all(
        server: ServerProcess, supervised: list[WorkerProcess]) -> None:
    queue = SyncQueue("procs", f"redis://127.0.0.1:{server.port}")
    ids = [generated(server.port, "procs", b'{"sleep": 30}') for _ in range(4)]
    worker = WorkerProcess("tests.client.e2e_handlers:sleepy", "procs", server.port, *FLAGS)
    supervised.append(worker)
    wait_for(lambda: queue.stats().active == 4, 20, "both processes holding two jobs each")
    first = children(worker.proc.pid)
    assert len(first) == 2
    page = Web(server.http_port).get("/workers").text
    for pid in first:
        assert f"pid {pid}" in page  # each process is a worker of its own

    os.kill(first[0], signal.SIGKILL)
    wait_for(lambda: len(set(children(worker.proc.pid)) - set(first)) == 1, 10,
             "a new process in place of the killed one")
    # The killed process's jobs come back through the sweep and are claimed again.
    wait_for(lambda: sum(queue.get(i).attempts for i in ids) >= 6 and
             queue.stats().active == 4, 20, "the dead process's jobs claimed again")
    second = children(worker.proc.pid)
    assert "exited (killed by SIGKILL)" in worker.output()

    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(10) == 0, worker.output()
    assert not any(alive(pid) for pid in second)
    stats = queue.stats()
    assert (stats.active, stats.pending, stats.failures_total) == (0, 4, 0)  # requeued
    queue.close()


@pytest.mark.timeout(60)
def test_children_stop_gracefully_when_the_supervisor_is_killed(
        server: ServerProcess, supervised: list[WorkerProcess]) -> None:
    queue = SyncQueue("orphans", f"redis://127.0.0.1:{server.port}")
    for _ in range(2):
        generated(server.port, "orphans", b'{"sleep": 30}')
    worker = WorkerProcess("tests.client.e2e_handlers:sleepy", "orphans", server.port, *FLAGS)
    supervised.append(worker)
    wait_for(lambda: queue.stats().active == 2 and len(children(worker.proc.pid)) == 2, 20,
             "two processes, two jobs held")
    kids = children(worker.proc.pid)
    worker.signal(signal.SIGKILL)
    worker.proc.wait(10)
    wait_for(lambda: not any(alive(pid) for pid in kids), 10, "the orphans to stop")
    stats = queue.stats()
    assert (stats.active, stats.pending, stats.stalled_total) == (0, 2, 0)  # requeued, not swept
    queue.close()


@pytest.mark.timeout(60)
def test_a_child_refused_for_good_stops_them_all_with_its_status(
        server: ServerProcess, supervised: list[WorkerProcess]) -> None:
    """A queue name the server refuses (WRONGTYPE on its keys): restarting would only
    fail again, so the supervisor exits 1 with the children's reason on stderr."""
    with redis.Redis(port=server.port) as client:
        client.hset("emq:{typed}:pending", "a", "b")
    worker = WorkerProcess("tests.client.e2e_handlers:quick", "typed", server.port, *FLAGS)
    supervised.append(worker)
    assert worker.proc.wait(20) == 1
    output = worker.output()
    assert "claim refused" in output and "stopping the others" in output
    assert "starting another" not in output
