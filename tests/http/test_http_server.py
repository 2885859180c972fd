"""The HTTP side of a real emqd: /metrics scraped and parsed, the password, start and stop."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.http.web import Web
from tests.support import ROOT, ServerProcess, free_port, start_emqd

ISSUE_NAMES = {
    "emqd_jobs", "emqd_jobs_added", "emqd_jobs_completed", "emqd_jobs_failures",
    "emqd_jobs_retried", "emqd_jobs_dead", "emqd_jobs_stalled", "emqd_jobs_revived",
    "emqd_queue_latency_seconds", "emqd_job_duration_seconds", "emqd_job_wait_seconds",
    "emqd_lane_active", "emqd_lanes", "emqd_connected_clients", "emqd_blocked_clients",
    "emqd_commands", "emqd_aof_size_bytes", "emqd_aof_fsync_seconds", "emqd_memory_rss_bytes",
    "emqd_up", "emqd_start_time_seconds", "emqd_info",
}


def families(web: Web) -> dict[str, object]:
    answer = web.get("/metrics")
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {family.name: family for family in text_string_to_metric_families(answer.text)}


def test_a_scrape_has_every_name_of_the_issue(tmp_path: Path) -> None:
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path), http=True)
    try:
        with redis.Redis(port=server.port) as r:
            r.execute_command("EMQ.ADD", "mail", "x")
            r.execute_command("EMQ.ADD", "tenants", "y", "GROUP", "acme")
            r.execute_command("EMQ.CLAIM", "mail", 30_000)
            found = families(Web(server.http_port))
        assert ISSUE_NAMES <= set(found), ISSUE_NAMES - set(found)
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in found.values() for s in family.samples}
        assert samples[("emqd_jobs", (("queue", "mail"), ("state", "active")))] == 1
        assert samples[("emqd_lanes", (("queue", "tenants"),))] == 1
        assert samples[("emqd_aof_size_bytes", ())] == (tmp_path / "emqd.aof").stat().st_size
        assert samples[("emqd_connected_clients", ())] == 1  # the redis-py client, still open
        assert samples[("emqd_commands_total", (("command", "emq.claim"),))] == 1
        assert f"http://127.0.0.1:{server.http_port}/" in server.output()
    finally:
        server.stop()


def test_the_histograms_count_what_the_verbs_did() -> None:
    server = start_emqd(http=True)
    try:
        with redis.Redis(port=server.port) as r:
            r.execute_command("EMQ.ADD", "mail", "x")
            job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "mail", 30_000)
            r.execute_command("EMQ.COMPLETE", "mail", job_id, token)
        found = families(Web(server.http_port))
        counts = {s.name: s.value for name in ("emqd_job_wait_seconds", "emqd_job_duration_seconds")
                  for s in found[name].samples if s.name.endswith("_count")}
        assert counts == {"emqd_job_wait_seconds_count": 1, "emqd_job_duration_seconds_count": 1}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def protected() -> Iterator[ServerProcess]:
    server = start_emqd("--requirepass", "sekret", http=True)
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/", "/metrics", "/live/overview", "/queues/q", "/queues/q/dead",
                                  "/queues/q/jobs/1", "/static/app.js", "/no/such/page"])
def test_with_a_password_nothing_is_served_without_it(protected: ServerProcess, path: str) -> None:
    port = protected.http_port
    for web in (Web(port), Web(port, password="wrong")):
        answer = web.get(path)
        assert answer.status == 401, path
        assert answer.headers["WWW-Authenticate"] == 'Basic realm="emqd", charset="UTF-8"'
        assert b"emqd needs its password" in answer.body
        assert b"<html" not in answer.body and b"emqd_" not in answer.body


def test_with_the_password_any_user_name_gets_in(protected: ServerProcess) -> None:
    port = protected.http_port
    with redis.Redis(port=protected.port, password="sekret") as r:
        r.flushall()
        r.execute_command("EMQ.ADD", "q", "x")
    web = Web(port, password="sekret")
    assert web.get("/").status == 200 and "/queues/q" in web.get("/").text
    assert "emqd_up 1.0" in web.get("/metrics").text
    # Any Host: behind a password the server may sit under any name.
    assert web.get("/", Host="emqd.internal:6391").status == 200


def test_a_post_without_the_password_changes_nothing(protected: ServerProcess) -> None:
    port = protected.http_port
    with redis.Redis(port=protected.port, password="sekret") as r:
        r.flushall()
        r.execute_command("EMQ.ADD", "q", "x")
        page = Web(port, password="sekret").get("/queues/q")
        thief = Web(port)
        token = page.text.split('name="csrf" value="')[1].split('"')[0]
        assert thief.post("/queues/q/pause", {"csrf": token}).status == 401
        assert r.hget("emq:{q}:meta", "paused") is None


def test_http_port_0_serves_no_http() -> None:
    server = start_emqd()
    try:
        assert server.http_port == 0 and "dashboard" not in server.output()
    finally:
        server.stop()


def test_an_http_port_in_use_stops_the_start_with_a_message() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-m", "emqd", "--port", str(free_port()), "--appendonly", "no",
             "--http-port", str(taken.getsockname()[1])],
            capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 1
    assert "cannot start" in done.stderr and "address already in use" in done.stderr.lower()


def test_a_revive_answered_by_the_page_survives_a_kill(tmp_path: Path) -> None:
    """Under --appendfsync always, the page's 303 leaves after the REVIVE is fsynced."""
    flags = ("--appendonly", "yes", "--appendfsync", "always")
    server = start_emqd(*flags, dir=str(tmp_path), http=True)
    try:
        with redis.Redis(port=server.port) as r:
            r.execute_command("EMQ.ADD", "q", "x")
            job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
            r.execute_command("EMQ.FAIL", "q", job_id, token, "MAXATTEMPTS", 1)
        web = Web(server.http_port)
        done = web.submit(web.get("/queues/q/dead"), "/queues/q/jobs/1/revive")
        assert done.status == 200 and "pending again" in done.text
    finally:
        server.kill(signal.SIGKILL)
        server.stop()
    again = start_emqd(*flags, dir=str(tmp_path))
    try:
        with redis.Redis(port=again.port) as r:
            assert r.hget("emq:{q}:job:1", "state") == b"pending"
            assert r.zrange("emq:{q}:pending", 0, -1) == [b"1"]
    finally:
        again.stop()
