"""End to end in headless Chromium: the dashboard as a person uses it.

Load `/`, open a queue, revive a dead job by clicking, and see it pending
again through the RESP side; the overview refreshing itself without a reload;
logging in with the password. Every page must load without a script error or
a Content-Security-Policy violation. The overview's screenshot is written to
$EMQD_SCREENSHOT when set (the README's docs/dashboard.png is made so).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Error as PlaywrightError

from tests.http.browser import chromium
from tests.support import ROOT, ServerProcess, start_emqd

pytestmark = pytest.mark.slow
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = start_emqd(http=True)
    yield process
    process.stop()


@pytest.fixture
def r(server: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=server.port)
    client.flushall()
    yield client
    client.close()


class Watched:
    """A page whose script errors and console errors (CSP violations among them) are kept."""

    def __init__(self, context: object) -> None:
        self.page = context.new_page()  # type: ignore[attr-defined]
        self.page.set_default_timeout(10_000)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))


@pytest.fixture
def watched(browser: object) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 640})  # type: ignore[attr-defined]
    watched = Watched(context)
    yield watched
    context.close()
    assert watched.errors == []


def a_dead_letter(r: redis.Redis, queue: str, payload: str, error: str) -> bytes:
    r.execute_command("EMQ.ADD", queue, payload)
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", queue, 30_000)
    r.execute_command("EMQ.FAIL", queue, job_id, token, "MAXATTEMPTS", 1, "ERROR", error)
    return job_id


def test_revive_a_dead_job_by_clicking(server: ServerProcess, r: redis.Redis,
                                       watched: Watched) -> None:
    job_id = a_dead_letter(r, "mail", '{"to": "ann@example.com"}', "smtp timeout")
    r.execute_command("EMQ.ADD", "mail", '{"to": "bob@example.com"}')
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/")
    row = page.locator("table.queues tbody tr", has_text="mail")
    assert row.locator('[data-state="dead"]').inner_text() == "1"
    row.locator("a.queue").click()
    page.wait_for_url("**/queues/mail")
    assert page.locator("h1").inner_text().startswith("mail")
    page.get_by_role("link", name="dead 1").click()
    page.wait_for_url("**/queues/mail/dead")
    dead_row = page.locator("table.dead tbody tr", has_text="smtp timeout")
    dead_row.get_by_role("button", name="Revive").click()
    page.wait_for_url("**/queues/mail/dead?done=revived")
    assert "pending again" in page.locator(".notice").inner_text()
    assert "No dead letters" in page.locator("main").inner_text()
    assert r.hget(f"emq:{{mail}}:job:{job_id.decode()}", "state") == b"pending"
    claimed = r.execute_command("EMQ.CLAIM", "mail", 30_000, "COUNT", 2)
    assert sorted(job[0] for job in claimed) == sorted([job_id, b"2"])


def test_delete_asks_first(server: ServerProcess, r: redis.Redis, watched: Watched) -> None:
    a_dead_letter(r, "mail", "x", "boom")
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/queues/mail/dead")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete").click()
    assert r.exists("emq:{mail}:job:1")  # dismissed: nothing sent
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/queues/mail/dead?done=removed")
    assert not r.exists("emq:{mail}:job:1")


def test_the_overview_refreshes_itself_without_a_reload(server: ServerProcess, r: redis.Redis,
                                                        watched: Watched) -> None:
    r.execute_command("EMQ.ADD", "mail", "x")
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/")
    pending = page.locator('table.queues tr:has(a.queue:text-is("mail")) [data-state="pending"]')
    assert pending.inner_text() == "1"
    page.evaluate("window.notReloaded = true")
    for i in range(4):
        r.execute_command("EMQ.ADD", "mail", f"more {i}")
    r.execute_command("EMQ.ADD", "late-queue", "y")
    page.wait_for_function(
        """() => document.querySelector('a.queue[href="/queues/late-queue"]') !== null""",
        timeout=10_000)
    assert pending.inner_text() == "5"
    assert page.evaluate("window.notReloaded") is True


def test_the_overview_screenshot(server: ServerProcess, r: redis.Redis, watched: Watched,
                                 tmp_path: Path) -> None:
    for i in range(40):
        r.execute_command("EMQ.ADD", "mail", f'{{"to": "user{i}@example.com"}}')
    for i in range(12):
        r.execute_command("EMQ.ADD", "reports", f"r{i}", "GROUP", f"tenant{i % 4}")
    r.execute_command("EMQ.ADD", "webhooks", "w", "DELAY", 3_600_000)
    for job in r.execute_command("EMQ.CLAIM", "mail", 30_000, "COUNT", 30):
        r.execute_command("EMQ.COMPLETE", "mail", job[0], job[1])
    r.execute_command("EMQ.CLAIM", "mail", 30_000, "COUNT", 3)
    r.execute_command("EMQ.CLAIM", "reports", 30_000, "COUNT", 4)
    for i in range(3):
        a_dead_letter(r, "webhooks", f"hook {i}", "HTTP 503")
    r.execute_command("EMQ.PAUSE", "webhooks")
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/")
    mail = page.locator("table.queues tr", has_text="mail")
    assert "30 since the start" in mail.locator(".chart-label").first.inner_text()
    assert mail.locator('svg.completed rect[height="32.0"]').count() == 1  # this minute, the peak
    path = Path(os.environ.get("EMQD_SCREENSHOT") or tmp_path / "dashboard.png")
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width == 1280 and height >= 300


@pytest.fixture(scope="module")
def protected() -> Iterator[ServerProcess]:
    process = start_emqd("--requirepass", "sekret", http=True)
    yield process
    process.stop()


def test_log_in_with_the_password(browser: object, protected: ServerProcess) -> None:
    with redis.Redis(port=protected.port, password="sekret") as r:
        r.flushall()
        r.execute_command("EMQ.ADD", "mail", "x")
    url = f"http://127.0.0.1:{protected.http_port}/"
    # Without the password, or with a wrong one, the browser shows nothing of the queues:
    # the 401 page, or (Chromium's choice) a navigation ended by the refused credentials.
    for credentials in (None, {"username": "ops", "password": "nope"}):
        refused = browser.new_context(http_credentials=credentials)  # type: ignore[attr-defined]
        try:
            page = refused.new_page()
            try:
                response = page.goto(url)
            except PlaywrightError as error:
                assert "ERR_INVALID_AUTH_CREDENTIALS" in str(error)
            else:
                assert response.status == 401 and "mail" not in page.content()
        finally:
            refused.close()
    context = browser.new_context(http_credentials={"username": "ops", "password": "sekret"})  # type: ignore[attr-defined]
    try:
        watched = Watched(context)
        page = watched.page
        assert page.goto(url).status == 200
        page.locator("a.queue", has_text="mail").click()
        page.get_by_role("button", name="Pause").click()
        page.wait_for_url("**/queues/mail?done=paused")
        time.sleep(0.1)
        with redis.Redis(port=protected.port, password="sekret") as r:
            assert r.hget("emq:{mail}:meta", "paused") == b"1"
        assert watched.errors == []
    finally:
        context.close()


# --- issue 25, item 8: the Workers page, a job's log and progress, cleaning ------------------
WORKER = """
import asyncio, os, sys
from emqd.client import Queue, Worker

async def photo(job):
    await job.progress(40)
    await job.log("resizing cat.jpg")
    await asyncio.sleep(60)  # held until the test stops the worker

Worker(Queue("thumbs", sys.argv[1]), photo, concurrency=3).run_sync()
"""


def test_the_workers_page_shows_a_running_worker_and_its_job(
        server: ServerProcess, r: redis.Redis, watched: Watched) -> None:
    """A real emqd Worker (it names its connections itself) holding a job: the Workers page
    shows its host, pid, queue, concurrency and the job; the job's page its log and
    progress."""
    job_id = r.execute_command("EMQ.ADD", "thumbs", "cat.jpg").decode()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, f"redis://127.0.0.1:{server.port}"],
                              env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while r.execute_command("EMQ.LOGS", "thumbs", job_id) == []:
            assert time.monotonic() < deadline and worker.poll() is None
            time.sleep(0.05)
        page = watched.page
        page.goto(f"http://127.0.0.1:{server.http_port}/")
        page.get_by_role("link", name="Workers").click()
        page.wait_for_url("**/workers")
        row = page.locator("table.workers tbody tr")
        assert row.count() == 1
        text = row.inner_text()
        assert f"{socket.gethostname()} · pid {worker.pid}" in text
        assert "thumbs" in text and "\t3\t" in text  # the queue, the concurrency
        assert row.locator("td.held").get_attribute("data-held") == "1"
        row.locator("td.held a.job").click()
        page.wait_for_url(f"**/queues/thumbs/jobs/{job_id}")
        assert page.locator("section.log pre").inner_text().strip() == "resizing cat.jpg"
        assert page.locator("section.progress progress").get_attribute("value") == "40.0"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


def test_clean_completed_jobs_by_clicking(server: ServerProcess, r: redis.Redis,
                                          watched: Watched) -> None:
    for i in range(3):
        r.execute_command("EMQ.ADD", "mail", f"p{i}")
    for job_id, token, _, _ in r.execute_command("EMQ.CLAIM", "mail", 30_000, "COUNT", 3):
        r.execute_command("EMQ.COMPLETE", "mail", job_id, token)
    old = r.zscore("emq:{mail}:completed", b"1") - 2 * 3_600_000  # finished two hours ago
    r.zadd("emq:{mail}:completed", {b"1": old})
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/queues/mail?state=completed")
    assert page.locator("table.jobs td.took").count() == 3  # each one's duration
    form = page.locator("form.clean")
    form.locator('input[name="age"]').fill("1")
    form.locator('select[name="unit"]').select_option("hours")
    form.locator('input[name="confirm"]').check()
    form.get_by_role("button", name="Clean").click()
    page.wait_for_url("**done=cleaned**")
    assert "1 completed jobs were removed." in page.locator(".notice").inner_text()
    assert sorted(r.zrange("emq:{mail}:completed", 0, -1)) == [b"2", b"3"]


# --- issue 38: the metrics history's charts, a worker quieted and stopped ---------------------
def test_the_history_charts_show_each_minute_as_emq_metrics_answers_it(
        server: ServerProcess, r: redis.Redis, watched: Watched, tmp_path: Path) -> None:
    """Three minutes of history, in the stored form housekeeping's close writes (the three
    minutes before this one, which may span two hours): the charts show three points a
    series, each with the reply's numbers. Screenshot: $EMQD_HISTORY_SCREENSHOT or a temp
    file."""
    from emqd.rules import minutes
    from emqd.rules.minutes import Minute

    now_minute = int(time.time() * 1000) // 60_000
    made = [Minute(now_minute - 3 + i, 40 + 7 * i, 3 * i, i, (2 + i, 30 + i, 60 + i),
                   (70 + i, 90 + 2 * i, 120 + 3 * i)) for i in range(3)]
    hours: dict[int, bytes] = {}
    for one in made:
        hours[one.minute // 60] = hours.get(one.minute // 60, b"") + minutes.record(one)
    blocks = [minutes.block(hour, records) for hour, records in sorted(hours.items())]
    r.execute_command("EMQ.ADD", "mail", "x")
    r.hset("emq:{mail}:minutes", mapping={"cur": blocks[-1], "old": b"".join(blocks[:-1])})
    reply = r.execute_command("EMQ.METRICS", "mail")
    assert [entry[b"completed"] for entry in reply] == [40, 47, 54]
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.http_port}/queues/mail")
    history = page.locator("section.history")
    for chart, names in (("jobs", ("completed", "failures", "dead")),):
        for name in names:
            markers = history.locator(f'figure[data-chart="{chart}"] g.{name} circle.point')
            assert markers.count() == 3
            shown = [(int(markers.nth(i).get_attribute("data-minute")),
                      int(markers.nth(i).get_attribute("data-value"))) for i in range(3)]
            assert shown == [(entry[b"minute"], entry[name.encode()]) for entry in reply]
    run = history.locator("figure").nth(2)
    assert [int(run.locator("g.p99 circle.point").nth(i).get_attribute("data-value"))
            for i in range(3)] == [entry[b"run_p99"] for entry in reply]
    box = history.locator("figure").first.locator("svg").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 60  # drawn, not hidden
    path = Path(os.environ.get("EMQD_HISTORY_SCREENSHOT") or tmp_path / "history.png")
    history.screenshot(path=str(path))
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 5_000


def test_quiet_then_stop_a_running_worker_from_the_workers_page(
        server: ServerProcess, r: redis.Redis, watched: Watched) -> None:
    """A real emqd Worker holding a job: its row's Quiet and then Stop buttons (each asks
    first) set what its beat answers on its queue; obeying it is the worker's side."""
    r.execute_command("EMQ.ADD", "thumbs", "cat.jpg")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, f"redis://127.0.0.1:{server.port}"],
                              env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while r.execute_command("EMQ.STATS", "thumbs")[b"active"] == 0:
            assert time.monotonic() < deadline and worker.poll() is None
            time.sleep(0.05)
        name = next(client["name"] for client in r.client_list()
                    if client["name"].startswith("emqd-worker?"))
        page = watched.page
        page.goto(f"http://127.0.0.1:{server.http_port}/workers")
        row = page.locator("table.workers tbody tr")
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Quiet").click()
        page.wait_for_url("**/workers?done=quiet")
        assert r.execute_command("EMQ.BEAT", "thumbs", name) == b"quiet"
        assert row.locator("td.order").get_attribute("data-order") == "quiet"
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Stop").click()
        page.wait_for_url("**/workers?done=stop")
        assert r.execute_command("EMQ.BEAT", "thumbs", name) == b"stop"
        assert "finish what it holds and exit" in page.locator(".notice").inner_text()
        assert row.get_by_role("button", name="Resume").count() == 1
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
