"""Quiet and stop (PROTOCOL.md 22.6): an `emqd-worker` subprocess learns from its beat
(EMQ.BEAT) what an operator asked with EMQ.WORKER, through the wire and by pressing the
dashboard's buttons in headless Chromium: quiet claims nothing more, stop finishes the job
it holds and exits 0.

Every wait is bounded (`wait_for`); workers are stopped by PID in teardown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from emqd.client import SyncQueue
from tests.client.test_worker_e2e import WorkerProcess, wait_for
from tests.http.browser import chromium
from tests.support import ServerProcess, start_emqd

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
BLOCK_S = 1.0  # emqd-worker's CLAIM parks this long: one parked when quiet came may still hand out


@pytest.fixture
def worker_processes() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def worker_name(r: redis.Redis, pid: int) -> str:
    for client in r.client_list():
        if client["name"].startswith("emqd-worker?") and f"pid={pid}&" in client["name"]:
            return str(client["name"])
    raise AssertionError(f"no connection named for worker {pid}")


def quiet_then_stop(r: redis.Redis, port: int, workers: list[WorkerProcess],
                    quiet: Callable[[str], None], stop: Callable[[str], None]) -> None:
    """A worker holds a long job; `quiet(name)` and it claims nothing more; `stop(name)`
    and it finishes that job and exits 0, the job it never claimed left pending."""
    queue = SyncQueue("orders", f"redis://127.0.0.1:{port}")
    worker = WorkerProcess("tests.client.e2e_handlers:sleepy", "orders", port,
                           "--progress-interval", "0")
    workers.append(worker)
    held = queue.add(json.dumps({"sleep": 6}))
    wait_for(lambda: queue.stats().active == 1, 15, "the worker to claim the long job")
    name = worker_name(r, worker.proc.pid)

    quiet(name)
    wait_for(lambda: "asked to quiet" in worker.output(), 10, "the beat to learn quiet")
    time.sleep(BLOCK_S + 0.5)  # any claim parked before it has returned
    waiting = queue.add(json.dumps({"sleep": 0}))
    time.sleep(1.0)
    assert queue.stats().pending == 1 and worker.proc.poll() is None

    stop(name)
    wait_for(lambda: worker.proc.poll() is not None, 20, "the worker to exit")
    assert worker.proc.returncode == 0, worker.output()
    finished = queue.get(held)
    assert finished is not None and finished.state == "completed"  # finished, not requeued
    left = queue.get(waiting)
    assert left is not None and left.state == "pending"  # never claimed
    queue.close()


def test_quiet_then_stop_a_running_worker_through_the_wire(
        emqd_port: int, worker_processes: list[WorkerProcess]) -> None:
    with redis.Redis(port=emqd_port, decode_responses=True) as r:
        quiet_then_stop(
            r, emqd_port, worker_processes,
            lambda name: SyncQueue("orders", f"redis://127.0.0.1:{emqd_port}")
            .order_worker(name, "quiet"),
            lambda name: SyncQueue("orders", f"redis://127.0.0.1:{emqd_port}")
            .order_worker(name, "stop"))


@pytest.fixture
def dashboard() -> Iterator[ServerProcess]:
    process = start_emqd(http=True)
    yield process
    process.stop()


def test_quiet_then_stop_a_running_worker_from_the_dashboard(
        dashboard: ServerProcess, worker_processes: list[WorkerProcess]) -> None:
    with chromium() as browser, redis.Redis(port=dashboard.port, decode_responses=True) as r:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.set_default_timeout(10_000)

        def press(label: str) -> Callable[[str], None]:
            def pressing(name: str) -> None:
                page.goto(f"http://127.0.0.1:{dashboard.http_port}/workers")
                row = page.locator("table.workers tbody tr")
                assert row.count() == 1
                page.once("dialog", lambda dialog: dialog.accept())  # "Stop claiming? ..."
                row.get_by_role("button", name=label).click()
                page.wait_for_load_state()
                wait_for(lambda: page.locator("td.order").get_attribute("data-order")
                         == label.lower(), 10, f"the page to show {label.lower()}")
            return pressing

        quiet_then_stop(r, dashboard.port, worker_processes, press("Quiet"), press("Stop"))
