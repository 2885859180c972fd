"""One view from any front (issue 35): the dashboard of a front that owns nothing lists
every queue of the cluster, opens each one (served by its owner, or taken where it
belongs when nobody owns it), steers it, and its Workers page shows a worker connected
to it holding a job of a queue another front owns. Checked in headless Chromium."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from emqd.cluster.names import owner_key
from emqd.http.cluster_queues import QUEUES_PAGE
from tests.cluster.support import Cluster, front, fronts_live, until
from tests.http.browser import chromium
from tests.support import ServerProcess, free_port

pytestmark = pytest.mark.slow
IDLE_MS = 1500  # the fronts let an unused queue go this soon (a queue with a job running stays)


@pytest.fixture(scope="module")
def fronts(cluster: Cluster) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        for _ in range(2):
            http_port = free_port()
            server = front(cluster, "--http-port", str(http_port),
                           "--cluster-idle-ms", str(IDLE_MS))
            server.http_port = http_port
            started.append(server)
        for server in started:
            until(lambda server=server: fronts_live(server) >= 2, 10,
                  f"front {server.port} sees the other")
            until(lambda server=server: _status(server, "/") == 200, 10,
                  f"front {server.port}'s dashboard")
        yield started
    finally:
        for server in started:
            server.stop()


def _status(server: ServerProcess, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}",
                                    timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _owned(server: ServerProcess) -> int:
    with redis.Redis(port=server.port) as client:
        return int(client.info("cluster")["emqd_cluster_queues_owned"])


def _queues(via: ServerProcess, names: list[str]) -> None:
    """Each queue made with two jobs (it goes to a live front, which lets it go idle)."""
    with redis.Redis(port=via.port) as client:
        for name in names:
            client.execute_command("EMQ.ADD", name, f"{name}-first")
            client.execute_command("EMQ.ADD", name, f"{name}-second")


def _placed_at(via: ServerProcess, at: ServerProcess) -> str | None:
    """A queue name that, while nobody owns it, goes to `at` (fronts.py `place`)."""
    address = f"127.0.0.1:{at.port}".encode()
    with redis.Redis(port=via.port) as client:
        return next((f"view{i}" for i in range(200)
                    if client.execute_command("EMQ.OWNER", f"view{i}") == address), None)


def test_a_front_that_owns_nothing_shows_and_opens_every_queue(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    empty, owner = fronts
    busy = until(lambda: _placed_at(empty, owner), 10, "a queue going to the other front")
    idle = [f"{busy}-idle-a", f"{busy}-idle-b"]
    _queues(owner, [busy, *idle])
    nodes = cluster.client()
    until(lambda: all(nodes.get(owner_key(name.encode())) is None for name in [busy, *idle]),
          15, "the unused queues let go")
    # A worker connected to the front that owns nothing holds a job of `busy` (its claim
    # is forwarded to the front the queue goes to, which takes it): the queue stays owned
    # while the job runs; the others stay idle, owned by nobody.
    until(lambda: _placed_at(empty, owner) == busy, 10, f"{busy} going to the other front")
    worker_name = (f"emqd-worker?host=view-host&pid=77&queue={busy}&concurrency=1"
                   f"&started=1700000000000")
    worker = redis.Redis(port=empty.port)
    worker.client_setname(worker_name)
    held_id, _token, _, _ = worker.execute_command("EMQ.CLAIM", busy, 120_000)
    assert nodes.get(owner_key(busy.encode())) is not None
    assert _owned(empty) == 0
    owner_address = f"127.0.0.1:{owner.port}"

    with chromium() as browser:
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        page.set_default_timeout(15_000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        base = f"http://127.0.0.1:{empty.http_port}"

        page.goto(f"{base}/")
        rows = {page.locator("a.queue").nth(i).inner_text(): i
                for i in range(page.locator("a.queue").count())}
        assert {busy, *idle} <= set(rows)
        table = page.locator("table.queues tbody tr")
        busy_row = table.nth(rows[busy])
        assert busy_row.locator("td.owner").inner_text() == owner_address
        assert busy_row.locator("a[data-state=active]").inner_text() == "1"
        assert busy_row.locator("a[data-state=pending]").inner_text() == "1"
        for name in idle:
            row = table.nth(rows[name])
            assert row.locator("td.owner").inner_text() == "idle, unowned"
            assert row.locator("a[data-state=pending]").inner_text() == "2"
        assert "6390" not in page.locator("body").inner_text()
        assert _owned(empty) == 0  # listing took nothing

        for name in (busy, *idle):
            page.goto(f"{base}/")
            page.locator("a.queue", has_text=name).first.click()
            page.wait_for_url(f"**/queues/{name}")
            assert page.locator("h1").first.inner_text().startswith(name)
            assert f"{name}-second" in page.locator("table").first.inner_text()
        page.goto(f"{base}/queues/{busy}?state=active")
        assert held_id.decode() in page.locator("table").first.inner_text()

        # A button on a page another front serves: steered there, back on this front.
        page.goto(f"{base}/queues/{busy}")
        page.get_by_role("button", name="Pause").click()
        page.wait_for_url(f"**/queues/{busy}?done=paused")
        assert page.locator("h1 .tag.paused").count() == 1
        with redis.Redis(port=owner.port) as client:
            stats = client.execute_command("EMQ.STATS", busy)
        assert stats[b"paused"] == 1

        # The Workers page joins the worker here with the job it holds at the owner.
        page.goto(f"{base}/workers")
        held = page.locator("td.held")
        assert held.count() == 1
        assert held.first.get_attribute("data-held") == "1"
        assert f"{busy} › {held_id.decode()}" in held.first.inner_text()
        assert "view-host" in page.locator("table.workers").inner_text()
        assert page.locator("section.unheld").count() == 0
        context.close()
        assert errors == []

    # A queue nobody ever made: the 404, and no front took a lease on it.
    assert _status(empty, "/queues/nosuch-view") == 404
    assert nodes.get(owner_key(b"nosuch-view")) is None
    worker.close()


def _html(server: ServerProcess, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}",
                                timeout=5) as answer:
        return str(answer.read().decode())


def test_the_overview_pages_the_queues_in_the_order_they_were_made_and_says_so(
        fronts: list[ServerProcess]) -> None:
    """The registry lists queues oldest first: the next page holds queues made later."""
    made = [f"paged{i:03d}" for i in range(QUEUES_PAGE + 1)]
    with redis.Redis(port=fronts[0].port) as client:
        pipe = client.pipeline(transaction=False)
        for name in made:
            pipe.execute_command("EMQ.ADD", name, "x")
        pipe.execute()
    first = _html(fronts[1], "/")
    pages = int(first.split("page 1 of ", 1)[1].split("<", 1)[0])
    assert pages >= 2
    assert 'rel="next" href="/?page=2">made later →</a>' in first
    last = _html(fronts[1], f"/?page={pages}")
    assert made[-1] in last
    assert f'rel="prev" href="/?page={pages - 1}">← made earlier</a>' in last
    assert "older →" not in first + last and "← newer" not in first + last
