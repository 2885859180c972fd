"""The dashboard's pages over the wire: a real emqd, a real HTTP client, the RESP side to check.

Escaping (a `<script>` queue name and payload show as text), names that are
not UTF-8, paging, searches, 404s, and every action through its form, whose
effect is read back through the RESP side.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.http.web import Web
from tests.support import ServerProcess, start_emqd


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


@pytest.fixture
def web(server: ServerProcess, r: redis.Redis) -> Web:
    return Web(server.http_port)


def ids_listed(page: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'<a class="job" href="[^"]*">([^<]*)</a>', page)]


def test_the_overview_lists_every_queue_with_its_counts(r: redis.Redis, web: Web) -> None:
    for i in range(3):
        r.execute_command("EMQ.ADD", "mail", f"m{i}")
    r.execute_command("EMQ.ADD", "reports", "r", "DELAY", 60_000)
    r.execute_command("EMQ.CLAIM", "mail", 30_000)
    page = web.get("/")
    assert page.status == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<a class="queue" href="/queues/mail">mail</a>' in page.text
    assert '<a href="/queues/mail?state=pending" data-state="pending">2</a>' in page.text
    assert '<a href="/queues/mail?state=active" data-state="active">1</a>' in page.text
    assert '<a href="/queues/reports?state=scheduled" data-state="scheduled">1</a>' in page.text
    assert 'data-refresh="/live/overview"' in page.text
    live = web.get("/live/overview")
    assert live.status == 200 and "<html" not in live.text and "/queues/reports" in live.text


def test_an_empty_server_says_how_to_begin(web: Web) -> None:
    assert "No queue yet" in web.get("/").text


def test_script_in_names_payloads_and_errors_shows_as_text(r: redis.Redis, web: Web) -> None:
    evil = "<script>alert(1)</script>"
    r.execute_command("EMQ.ADD", evil, evil, "ID", evil)
    r.execute_command("EMQ.CLAIM", evil, 30_000)
    r.execute_command("EMQ.FAIL", evil, evil, 1, "MAXATTEMPTS", 1, "ERROR",
                      '<img src=x onerror="x">')
    pages = [web.get("/"), web.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E?state=dead"),
             web.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E/dead"),
             web.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E/jobs/"
                     "%3Cscript%3Ealert(1)%3C%2Fscript%3E")]
    for page in pages:
        assert page.status == 200, page.url
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert page.text.count("<script") == 1  # ours: <script src="/static/app.js">
    assert "&lt;img src=x onerror=&#34;x&#34;&gt;" in pages[2].text
    assert "script-src 'self'" in pages[0].headers["Content-Security-Policy"]


def test_names_and_payloads_that_are_not_utf8_show_escaped(r: redis.Redis, web: Web) -> None:
    queue, job_id = b"caf\xe9/\x00", b"\xff/id%2F"
    r.execute_command("EMQ.ADD", queue, b"pay\xc3\x28load\x1b", "ID", job_id)
    overview = web.get("/")
    assert "caf\\xe9/\\x00" in overview.text
    assert 'href="/queues/caf%E9%2F%00"' in overview.text
    listing = web.get("/queues/caf%E9%2F%00")
    assert listing.status == 200 and ids_listed(listing.text) == ["\\xff/id%2F"]
    job = web.get("/queues/caf%E9%2F%00/jobs/%FF%2Fid%252F")
    assert job.status == 200
    assert "pay\\xc3(load\\x1b" in job.text


def test_a_missing_queue_or_job_is_a_404_page(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    for path in ["/queues/nope", "/queues/nope/dead", "/queues/q/jobs/404",
                 "/queues/%7Bbad%7D", "/no/such/page", "/queues/nope/jobs/1"]:
        page = web.get(path)
        assert page.status == 404, path
        assert "<h1>Not found</h1>" in page.text
    assert "no such job" in web.get("/queues/q/jobs/404").text


def test_bad_parameters_are_a_400_page(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    for query in ["state=lost", "page=0", "page=x", "page=01", "q=x&from=-1"]:
        page = web.get(f"/queues/q?{query}")
        assert page.status == 400, query
        assert "<h1>Bad request</h1>" in page.text


def test_jobs_are_paged_newest_first(r: redis.Redis, web: Web) -> None:
    for i in range(1, 121):
        r.execute_command("EMQ.ADD", "q", f"p{i}")
    first = web.get("/queues/q?order=newest")
    assert ids_listed(first.text) == [str(i) for i in range(120, 70, -1)]
    assert "page 1 of 3" in first.text
    assert 'rel="next" href="/queues/q?state=pending&amp;order=newest&amp;page=2"' in first.text
    second = web.get("/queues/q?state=pending&order=newest&page=2")
    third = web.get("/queues/q?state=pending&order=newest&page=3")
    assert ids_listed(second.text) == [str(i) for i in range(70, 20, -1)]
    assert ids_listed(third.text) == [str(i) for i in range(20, 0, -1)]
    assert 'rel="next"' not in third.text
    assert "older →</a>" in first.text and "← newer</a>" in second.text
    assert ids_listed(web.get("/queues/q?state=pending&order=newest&page=9").text) == []
    in_claim_order = web.get("/queues/q").text  # pending's default: what runs next first
    assert ids_listed(in_claim_order)[0] == "1"
    assert "runs later →</a>" in in_claim_order and "older →" not in in_claim_order


def test_the_pending_tab_lists_the_claim_order_with_priorities(r: redis.Redis, web: Web) -> None:
    """issue 25, item 8: newest first with no priority, nobody could tell which runs next.
    By default pending lists what claims take next first, numbered, with the priority."""
    r.execute_command("EMQ.ADD", "q", "low")
    r.execute_command("EMQ.ADD", "q", "urgent", "PRIORITY", -5)
    r.execute_command("EMQ.ADD", "q", "later")
    page = web.get("/queues/q").text
    assert ids_listed(page) == ["2", "1", "3"]
    claimed = r.execute_command("EMQ.CLAIM", "q", 5000, "COUNT", 3)
    assert [job[0] for job in claimed] == [b"2", b"1", b"3"]  # the page's order
    assert re.findall(r'<td class="num priority">(-?\d+)</td>', page) == ["-5", "0", "0"]
    assert re.findall(r'<td class="num position">(\d+)</td>', page) == ["1", "2", "3"]
    assert web.get("/queues/q?state=dead&order=next").status == 400


def test_the_lists_label_the_token_and_say_what_it_counts(r: redis.Redis, web: Web) -> None:
    """A job added under an explicit id starts above its queue's earlier tokens, so after
    one run its `attempts` is 4 here, which a column headed "attempts" read as four runs."""
    r.execute_command("EMQ.ADD", "q", "x", "ID", "a")
    for _ in range(3):  # job a is claimed three times: the queue has issued tokens 1 to 3
        job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
        r.execute_command("EMQ.REQUEUE", "q", job_id, token)
    r.execute_command("EMQ.ADD", "q", "y", "ID", "b", "PRIORITY", "-1")
    r.execute_command("EMQ.ADD", "q", "z", "ID", "c")
    assert r.hget("emq:{q}:job:c", "attempts") == b"3"  # the floor: no token was issued yet
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
    assert (job_id, token) == (b"b", b"4")  # its first run
    r.execute_command("EMQ.COMPLETE", "q", job_id, token)
    done = web.get("/queues/q?state=completed").text
    assert re.findall(r'<td class="num token">(\d+)</td>', done) == ["4"]
    assert ">token<" in done and ">attempts<" not in done
    assert "It is not a count of runs" in done and 'id="token-hint"' in done
    waiting = web.get("/queues/q?state=pending").text
    assert ids_listed(waiting) == ["a", "c"]
    assert re.findall(r'<td class="num token">(.*?)</td>', waiting) == [
        "3", '<span class="hint" title="not claimed yet">–</span>']


def test_each_state_has_its_tab(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.ADD", "q", "b", "DELAY", 60_000)
    r.execute_command("EMQ.ADD", "q", "c")
    r.execute_command("EMQ.CLAIM", "q", 30_000)
    assert ids_listed(web.get("/queues/q?state=active").text) == ["1"]
    assert ids_listed(web.get("/queues/q?state=scheduled").text) == ["2"]
    assert ids_listed(web.get("/queues/q?state=pending").text) == ["3"]
    assert "No completed job" in web.get("/queues/q?state=completed").text


def test_a_flows_parent_is_in_the_waiting_tab_and_its_page_lists_its_children(
        r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.FLOW", "render", "page", "CHILD", "fetch", "a", "CHILD", "fetch", "b")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "fetch", 30_000)
    r.execute_command("EMQ.COMPLETE", "fetch", job_id, token, "RESULT", "<got a>")
    assert '<a href="/queues/render?state=waiting" data-state="waiting">1</a>' in web.get("/").text
    tab = web.get("/queues/render?state=waiting")
    assert ids_listed(tab.text) == ["1"] and "waiting since" in tab.text
    page = web.get("/queues/render/jobs/1")
    assert '<span class="tag state-waiting">waiting</span>' in page.text
    assert ids_listed(page.text.split("<h2>Children</h2>")[1]) == ["1", "2"]
    assert "&lt;got a&gt;" in page.text and "state-pending" in page.text
    child = web.get("/queues/fetch/jobs/2")
    assert 'Child of <a class="job" href="/queues/render/jobs/1">render › 1</a>' in child.text
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "fetch", 30_000)
    r.execute_command("EMQ.COMPLETE", "fetch", job_id, token, "RESULT", "got b")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "render", 30_000)
    r.execute_command("EMQ.COMPLETE", "render", job_id, token)
    done = web.get("/queues/render/jobs/1")  # a finished parent still lists its children
    assert '<span class="tag state-completed">completed</span>' in done.text
    assert ids_listed(done.text.split("<h2>Children</h2>")[1]) == ["1", "2"]
    assert "got b" in done.text


def test_the_queue_page_lists_its_schedules_and_its_rate(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.REPEAT", "mail", "tick", "EVERY", 60_000, "<ping>")
    r.execute_command("EMQ.REPEAT", "mail", "daily", "CRON", "30 7 * * *", "TZ", "Europe/Paris",
                      "digest")
    r.execute_command("EMQ.RATE", "mail", 10, 1000)
    page = web.get("/queues/mail")  # a queue with schedules but no job yet
    assert page.status == 200 and "<h2>Schedules</h2>" in page.text
    assert "every 1 min 0 s" in page.text
    assert "cron <code>30 7 * * *</code> (Europe/Paris)" in page.text
    assert "&lt;ping&gt;" in page.text
    assert "rate limit 10 claims / 1.0 s" in page.text


def test_search_by_id_opens_the_job_and_by_payload_filters(r: redis.Redis, web: Web) -> None:
    for i in range(1, 6):
        r.execute_command("EMQ.ADD", "q", f'{{"user": "u{i}", "vip": {str(i % 2 == 0).lower()}}}')
    found = web.get("/queues/q?state=pending&id=3")
    assert found.url.endswith("/queues/q/jobs/3") and "<code>3</code>" in found.text
    missing = web.get("/queues/q?state=pending&id=nine")
    assert missing.status == 200 and "No job <code>nine</code>" in missing.text
    vip = web.get("/queues/q?state=pending&q=%22vip%22%3A+true")
    assert ids_listed(vip.text) == ["4", "2"]
    assert "2 matches for <code>&#34;vip&#34;: true</code> among 5 pending jobs" in vip.text


def test_the_job_page_explains_the_row(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", '{"to":"ann","n":[1,2]}', "DELAY", 60_000)
    page = web.get("/queues/q/jobs/1")
    assert '<pre class="payload json">{\n  &#34;to&#34;: &#34;ann&#34;,' in page.text
    assert re.search(r"<th>created_ms</th>\s*<td>\s*20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC",
                     page.text)
    assert "<th>due</th>" in page.text and "(in " in page.text
    for counter in ("attempts", "failures", "stalled"):
        assert f"<th>{counter}</th>" in page.text
    assert "the fencing token" in page.text and "the retry budget" in page.text
    assert 'action="/queues/q/jobs/1/promote"' in page.text
    assert 'action="/queues/q/jobs/1/remove"' in page.text
    assert "/revive" not in page.text


def test_an_active_job_offers_cancel_only_and_its_holder_is_told(r: redis.Redis,
                                                                 web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    _, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
    page = web.get("/queues/q/jobs/1")
    assert "<th>lease until</th>" in page.text and "Held by a worker" in page.text
    assert re.findall(r'<form method="post" action="([^"]+)"', page.text) == [
        "/queues/q/jobs/1/cancel"]
    done = web.submit(page, "/queues/q/jobs/1/cancel")
    assert done.url.endswith("/queues/q/jobs/1?done=cancelled") and "was cancelled" in done.text
    assert '<span class="tag state-cancelled">cancelled</span>' in done.text
    assert "cancelled from the dashboard" in done.text  # its cancel_reason
    with pytest.raises(redis.ResponseError,
                       match="^EMQCANCELLED job was cancelled: cancelled from the dashboard$"):
        r.execute_command("EMQ.EXTEND", "q", "1", token, 30_000)
    again = web.submit(page, "/queues/q/jobs/1/cancel")  # the page is stale now
    assert again.status == 409 and "EMQSTATE job is cancelled" in again.text


def test_the_active_tab_cancels_a_row_and_the_cancelled_tab_lists_it(r: redis.Redis,
                                                                     web: Web) -> None:
    for payload in ("a", "b"):
        r.execute_command("EMQ.ADD", "q", payload)
    r.execute_command("EMQ.CLAIM", "q", 30_000, "COUNT", 2)
    tab = web.get("/queues/q?state=active")
    assert 'action="/queues/q/jobs/1/cancel"' in tab.text
    done = web.submit(tab, "/queues/q/jobs/2/cancel")
    assert done.url.endswith("/queues/q?state=active&done=cancelled")
    assert ids_listed(done.text) == ["1"]
    assert r.hget("emq:{q}:job:2", "state") == b"cancelled"
    cancelled = web.get("/queues/q?state=cancelled")
    assert ids_listed(cancelled.text) == ["2"] and "cancelled from the dashboard" in cancelled.text
    assert '<a href="/queues/q?state=cancelled" data-state="cancelled">1</a>' in web.get("/").text
    assert 'action="/queues/q/jobs/2/remove"' in web.get("/queues/q/jobs/2").text
    assert "/cancel" not in web.get("/queues/q/jobs/2").text


def test_pause_and_resume_from_the_queue_page(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    paused = web.submit(web.get("/queues/q"), "/queues/q/pause")
    assert paused.status == 200 and paused.url.endswith("/queues/q?done=paused")
    assert "The queue is paused" in paused.text
    assert r.execute_command("EMQ.CLAIM", "q", 30_000) is None
    assert r.hget("emq:{q}:meta", "paused") == b"1"
    resumed = web.submit(paused, "/queues/q/resume")
    assert "running again" in resumed.text
    assert r.execute_command("EMQ.CLAIM", "q", 30_000)[0] == b"1"


def dead_letters(r: redis.Redis, queue: str, count: int) -> None:
    for i in range(count):
        r.execute_command("EMQ.ADD", queue, f"p{i}")
    for _ in range(count):
        job_id, token, _, _ = r.execute_command("EMQ.CLAIM", queue, 30_000)
        r.execute_command("EMQ.FAIL", queue, job_id, token, "MAXATTEMPTS", 1, "ERROR", "boom")


def test_the_dead_letters_page_revives_and_deletes(r: redis.Redis, web: Web) -> None:
    dead_letters(r, "q", 3)
    page = web.get("/queues/q/dead")
    assert ids_listed(page.text) == ["3", "2", "1"] and page.text.count(">boom<") == 3
    revived = web.submit(page, "/queues/q/jobs/2/revive")
    assert revived.url.endswith("/queues/q/dead?done=revived") and "pending again" in revived.text
    assert ids_listed(revived.text) == ["3", "1"]
    row = r.hgetall("emq:{q}:job:2")
    assert row[b"state"] == b"pending" and b"failures" not in row  # RESET
    deleted = web.submit(revived, "/queues/q/jobs/3/remove")
    assert ids_listed(deleted.text) == ["1"] and not r.exists("emq:{q}:job:3")


def test_revive_all_is_confirmed_and_capped(r: redis.Redis, web: Web) -> None:
    dead_letters(r, "q", 4)
    confirm = web.get("/queues/q/dead/revive-all")
    assert "revives the <strong>4</strong> oldest" in confirm.text
    unconfirmed = web.submit(confirm, "/queues/q/dead/revive-all")  # the box left unticked
    assert unconfirmed.url.endswith("/queues/q/dead/revive-all")
    assert r.zcard("emq:{q}:dead") == 4
    r.execute_command("EMQ.ADD", "q", "late")  # more die after the page was shown
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
    r.execute_command("EMQ.FAIL", "q", job_id, token, "MAXATTEMPTS", 1)
    done = web.submit(confirm, "/queues/q/dead/revive-all", confirm="yes", reset="1")
    assert done.url.endswith("?done=revived_all&n=4")
    assert "4 dead letters are pending again" in done.text
    assert r.zrange("emq:{q}:dead", 0, -1) == [job_id]  # the one the user did not see
    assert r.zcard("emq:{q}:pending") == 4
    too_many = web.post("/queues/q/dead/revive-all", {
        "csrf": re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1),
        "confirm": "yes", "count": "1001"})
    assert too_many.url.endswith("/queues/q/dead/revive-all") and r.zcard("emq:{q}:dead") == 1


def test_a_refused_action_says_why_and_changes_nothing(r: redis.Redis, web: Web) -> None:
    dead_letters(r, "q", 1)
    page = web.get("/queues/q/dead")
    assert web.submit(page, "/queues/q/jobs/1/revive").status == 200
    again = web.submit(page, "/queues/q/jobs/1/revive")  # the page is stale now
    assert again.status == 409 and "EMQSTATE job is not dead" in again.text
    assert "Nothing was changed" in again.text


def test_promote_a_scheduled_job_now(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x", "DELAY", 600_000)
    done = web.submit(web.get("/queues/q/jobs/1"), "/queues/q/jobs/1/promote")
    assert done.url.endswith("/queues/q/jobs/1?done=promoted"), done.text
    assert r.hget("emq:{q}:job:1", "state") == b"pending"


def test_a_post_without_the_token_changes_nothing(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    assert web.post("/queues/q/pause", {}).status == 403  # no cookie yet
    page = web.get("/queues/q")
    assert web.post("/queues/q/pause", {"csrf": "guess"}).status == 403
    real = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    other_site = web.post("/queues/q/pause", {"csrf": real}, Origin="http://evil.example")
    assert other_site.status == 403
    assert r.hget("emq:{q}:meta", "paused") is None
    assert web.post("/queues/q/pause", {"csrf": real}).status == 200
    assert r.hget("emq:{q}:meta", "paused") == b"1"


def test_the_cookie_is_strict_and_the_page_headers_are_safe(web: Web) -> None:
    page = web.get("/")
    cookie = page.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"


def test_another_host_name_is_refused_without_a_password(web: Web) -> None:
    assert web.get("/", Host="attacker.example:6391").status == 421
    assert web.get("/metrics", Host="attacker.example").status == 421
    assert web.get("/", Host="localhost:6391").status == 200


def test_static_files_are_served(web: Web) -> None:
    script = web.get("/static/app.js")
    assert script.status == 200 and "data-refresh" in script.text
    assert web.get("/static/style.css").status == 200
    assert web.get("/static/../app.py").status == 404


# --- issue 25, item 8: what a Sidekiq Web or bull-board user misses ---------------------------
def test_lists_show_how_long_each_job_ran(r: redis.Redis, web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "done")
    r.execute_command("EMQ.ADD", "q", "running")
    r.execute_command("EMQ.CLAIM", "q", 30_000)
    r.hset("emq:{q}:job:1", "claimed_ms", 1_000_000)  # a run of exactly 2.5 s, to read back
    r.execute_command("EMQ.COMPLETE", "q", "1", "1")
    r.hset("emq:{q}:job:1", "finished_ms", 1_002_500)
    r.execute_command("EMQ.CLAIM", "q", 30_000)
    completed = web.get("/queues/q?state=completed").text
    assert "<th>took</th>" in completed and '<td class="took">2.5 s</td>' in completed
    active = web.get("/queues/q?state=active").text
    assert "<th>running for</th>" in active and re.search(r'<td class="took">\d+ ms</td>', active)


def test_the_job_page_shows_its_log_its_progress_and_finished_once(r: redis.Redis,
                                                                    web: Web) -> None:
    r.execute_command("EMQ.ADD", "q", "x")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
    r.execute_command("EMQ.PROGRESS", "q", job_id, token, "40")
    for line in ("resizing <cat.jpg>", "uploading"):
        r.execute_command("EMQ.LOG", "q", job_id, token, line)
    page = web.get("/queues/q/jobs/1").text
    assert '<progress max="100" value="40.0">' in page
    assert "resizing &lt;cat.jpg&gt;\nuploading\n" in page  # escaped, oldest first
    r.execute_command("EMQ.COMPLETE", "q", job_id, token)
    done = web.get("/queues/q/jobs/1").text
    assert done.count("<th>finished") == 1 and "<th>finished_ms</th>" in done


def test_completed_jobs_older_than_an_age_are_cleaned(r: redis.Redis, web: Web) -> None:
    for i in range(4):
        r.execute_command("EMQ.ADD", "q", f"p{i}")
    for job_id, token, _, _ in r.execute_command("EMQ.CLAIM", "q", 30_000, "COUNT", 4):
        r.execute_command("EMQ.COMPLETE", "q", job_id, token)
    day = 86_400_000
    for job_id, days in ((b"1", 3), (b"2", 2)):  # finished days ago
        r.zadd("emq:{q}:completed", {job_id: r.zscore("emq:{q}:completed", job_id) - days * day})
    page = web.get("/queues/q?state=completed")
    unconfirmed = web.submit(page, "/queues/q/completed/clean", age="1", unit="days")
    assert r.zcard("emq:{q}:completed") == 4  # the box was not ticked: nothing removed
    assert web.submit(page, "/queues/q/completed/clean", age="x", unit="days",
                      confirm="yes").status == 400
    done = web.submit(page, "/queues/q/completed/clean", age="1", unit="days", confirm="yes")
    assert done.status == 200 and "2 completed jobs were removed." in done.text
    assert sorted(r.zrange("emq:{q}:completed", 0, -1)) == [b"3", b"4"]
    assert not r.exists("emq:{q}:job:1") and r.exists("emq:{q}:job:3")
    assert unconfirmed.url.endswith("/queues/q?state=completed")


def test_the_workers_page_shows_each_worker_and_the_jobs_it_holds(r: redis.Redis,
                                                                  web: Web,
                                                                  server: ServerProcess) -> None:
    from emqd.sessions import worker_name
    name = worker_name.build("web 1", 4242, ["mail", "q w"], 8, 1_700_000_000_000)
    worker, other = redis.Redis(port=server.port), redis.Redis(port=server.port)
    worker.client_setname(name)
    second = redis.Redis(port=server.port)
    second.client_setname(name)  # a pooled connection of the same worker: one row
    for n in range(3):
        r.execute_command("EMQ.ADD", "mail", f"p{n}")
    held = [worker.execute_command("EMQ.CLAIM", "mail", 30_000)[0],
            second.execute_command("EMQ.CLAIM", "mail", 30_000)[0]]
    nobody = other.execute_command("EMQ.CLAIM", "mail", 30_000)[0]  # an unnamed client's
    page = web.get("/workers").text
    assert "<strong>web 1</strong> · pid 4242" in page
    assert 'href="/queues/q%20w">q w</a>' in page
    assert '<td class="held" data-held="2">' in page
    row = page.split('<td class="held" data-held="2">')[1].split("</td>")[0]
    assert sorted(re.findall(r"mail › (\w+)", row)) == sorted(j.decode() for j in held)
    unheld = page.split('aria-label="active jobs no connected worker holds"')[1]
    assert f"mail › {nobody.decode()}" in unheld
    for client in (worker, other, second):
        client.close()


def test_quiet_stop_and_resume_a_worker_from_the_workers_page(r: redis.Redis, web: Web,
                                                              server: ServerProcess) -> None:
    """Each button is EMQ.WORKER on every queue the worker's name lists; the worker learns it
    from its beat (EMQ.BEAT), which is what it would read."""
    from emqd.sessions import worker_name
    name = worker_name.build("web-2", 77, ["mail", "sms"], 2, 1_700_000_000_000)
    worker = redis.Redis(port=server.port)
    worker.client_setname(name)
    page = web.get("/workers")
    assert '<td class="order" data-order="run">' in page.text
    assert re.findall(r'<form method="post" action="(/workers/\w+)"', page.text) == [
        "/workers/quiet", "/workers/stop"]
    quiet = web.submit(page, "/workers/quiet")
    assert quiet.url.endswith("/workers?done=quiet") and "claim nothing more" in quiet.text
    assert [worker.execute_command("EMQ.BEAT", queue, name) for queue in ("mail", "sms")] == \
        [b"quiet", b"quiet"]
    assert '<span class="tag order-quiet">quiet</span>' in quiet.text
    stop = web.submit(quiet, "/workers/stop")
    assert worker.execute_command("EMQ.BEAT", "sms", name) == b"stop"
    assert re.findall(r'<form method="post" action="(/workers/\w+)"', stop.text) == [
        "/workers/run"]
    web.submit(stop, "/workers/run")
    assert worker.execute_command("EMQ.BEAT", "mail", name) == b"run"
    assert r.exists("emq:{mail}:workers", "emq:{sms}:workers") == 0
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    assert web.post("/workers/stop", {"csrf": csrf, "name": "not-a-worker"}).status == 400
    worker.close()


def chart_points(page: str) -> dict[str, list[tuple[int, int]]]:
    """Each series of the queue page's charts: its markers' (minute, value)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for series, body in re.findall(r'<g class="series (\w+)" data-series="\w+" '
                                   r'data-points="\d+">(.*?)</g>', page, re.S):
        points = [(int(m), int(v)) for m, v in re.findall(
            r'data-minute="(\d+)" data-value="(\d+)"', body)]
        found.setdefault(series, []).extend(points)
    return found


def test_the_queue_page_charts_what_emq_metrics_answers(tmp_path: Path) -> None:
    """Real minutes, closed by a SIGTERM into the log: after the restart the charts' points
    are the reply's numbers, minute for minute."""
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path), http=True)
    try:
        with redis.Redis(port=server.port) as client:
            for i in range(6):
                client.execute_command("EMQ.ADD", "q", f"p{i}")
            for i in range(6):
                job_id, token, _, _ = client.execute_command("EMQ.CLAIM", "q", 30_000)
                if i < 4:
                    client.execute_command("EMQ.COMPLETE", "q", job_id, token)
                else:
                    client.execute_command("EMQ.FAIL", "q", job_id, token, "MAXATTEMPTS", 1)
        server.stop()
        server.restart()
        with redis.Redis(port=server.port) as client:
            reply = client.execute_command("EMQ.METRICS", "q")
        page = Web(server.http_port).get("/queues/q").text
        assert "<h2>History</h2>" in page
        points = chart_points(page)
        for name in ("completed", "failures", "dead"):
            assert points[name] == [(entry[b"minute"], entry[name.encode()]) for entry in reply]
        assert sum(value for _, value in points["completed"]) == 4
        waits = chart_points(page.split("<figcaption>wait")[1].split("<figcaption>run")[0])
        assert waits["p99"] == [(entry[b"minute"], entry[b"wait_p99"]) for entry in reply]
        assert Web(server.http_port).get("/queues/q?history=2d").status == 400
        assert "the last 72 hours" in Web(server.http_port).get("/queues/q?history=72h").text
    finally:
        server.stop()
