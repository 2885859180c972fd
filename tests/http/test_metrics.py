"""emqd/http/metrics.py: the exposition after known plans, parsed by prometheus_client itself."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from emqd import __version__
from emqd.commit.events import CLAIMED, COMPLETED, DEAD
from emqd.commit.plan import Plan
from emqd.http.metrics import Metrics
from emqd.persist.aof import AppendOnlyFile
from tests.http.inprocess import Local

NOW = 10**13


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    body, content_type = metrics.exposition(None)
    assert content_type.startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def metrics_of(local: Local, blocked: int = 0) -> Metrics:
    return Metrics(local.state, lambda: blocked, lambda: NOW)


def q(queue: str, **more: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"queue": queue, **more}.items()))


def test_the_figures_after_known_plans() -> None:
    local = Local()
    for i in range(4):
        local.run("EMQ.ADD", "mail", f"p{i}")
    local.run("EMQ.CLAIM", "mail", 30_000, "COUNT", 3)
    local.run("EMQ.COMPLETE", "mail", "1", "1")
    local.run("EMQ.FAIL", "mail", "2", "1", "MAXATTEMPTS", 1)
    local.run("EMQ.PAUSE", "mail")
    samples = scrape(metrics_of(local, blocked=2))
    for state, count in {"pending": 1, "active": 1, "scheduled": 0, "waiting": 0, "dead": 1,
                         "completed": 1}.items():
        assert samples[("emqd_jobs", q("mail", state=state))] == count
    assert samples[("emqd_jobs_completed_total", q("mail"))] == 1
    assert samples[("emqd_jobs_dead_total", q("mail"))] == 1
    assert samples[("emqd_queue_paused", q("mail"))] == 1
    assert samples[("emqd_queue_latency_seconds", q("mail"))] > 0
    assert samples[("emqd_blocked_clients", ())] == 2
    assert samples[("emqd_connected_clients", ())] == 0
    assert samples[("emqd_commands_total", (("command", "emq.add"),))] == 4
    assert samples[("emqd_up", ())] == 1
    assert samples[("emqd_start_time_seconds", ())] == local.state.started_ms / 1000
    assert samples[("emqd_info", (("run_id", local.state.run_id), ("version", __version__)))] == 1
    assert samples[("emqd_memory_rss_bytes", ())] > 1 << 20
    assert not any(name == "emqd_aof_size_bytes" for name, _ in samples)  # the log is off
    assert not any(name == "emqd_lanes" for name, _ in samples)  # no lanes here


def test_a_front_labels_every_series_with_its_address() -> None:
    """Cluster mode: each front's series say which front reports them, so that Prometheus,
    scraping every front, sums a queue's figures whichever front owned it."""
    local = Local()
    local.run("EMQ.ADD", "mail", "p")
    local.run("EMQ.CLAIM", "mail", 30_000)
    plain = scrape(metrics_of(local))
    labelled = scrape(Metrics(local.state, lambda: 0, lambda: NOW, front="10.0.0.7:6390"))
    assert labelled[("emqd_jobs", q("mail", state="active", front="10.0.0.7:6390"))] == 1
    assert labelled[("emqd_jobs_added_total", q("mail", front="10.0.0.7:6390"))] == 1
    assert labelled[("emqd_up", (("front", "10.0.0.7:6390"),))] == 1
    # every series of the single server's, and only those, each with the front's label
    unlabelled = {(name, tuple(pair for pair in labels if pair[0] != "front"))
                  for name, labels in labelled}
    assert all(("front", "10.0.0.7:6390") in labels for _, labels in labelled)
    assert unlabelled == set(plain)
    assert not any(labels for name, labels in plain if name == "emqd_up")


def test_a_flows_waiting_parent_is_a_state() -> None:
    local = Local()
    local.run("EMQ.FLOW", "render", "page", "CHILD", "fetch", "a")
    samples = scrape(metrics_of(local))
    assert samples[("emqd_jobs", q("render", state="waiting"))] == 1
    assert samples[("emqd_jobs", q("fetch", state="pending"))] == 1


def test_lanes_where_they_exist() -> None:
    local = Local()
    local.run("EMQ.ADD", "flat", "x")
    for group in ("a", "a", "b"):
        local.run("EMQ.ADD", "r", "x", "GROUP", group)
    local.run("EMQ.CLAIM", "r", 30_000)
    samples = scrape(metrics_of(local))
    assert samples[("emqd_lane_active", q("r"))] == 1
    assert samples[("emqd_lanes", q("r"))] == 1
    assert ("emqd_lanes", q("flat")) not in samples


def test_a_counter_a_client_broke_is_left_out_and_the_rest_stays() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("HSET", "emq:{q}:metrics:completed", "count", "NaN")
    local.run("DEL", "emq:{q}:pending")
    assert local.run("HSET", "emq:{q}:pending", "not", "a zset") == 1
    samples = scrape(metrics_of(local))
    assert ("emqd_jobs_completed_total", q("q")) not in samples
    assert ("emqd_jobs", q("q", state="pending")) not in samples
    assert samples[("emqd_jobs_dead_total", q("q"))] == 0
    assert samples[("emqd_jobs", q("q", state="active"))] == 0


def test_names_that_are_not_utf8_become_escaped_labels() -> None:
    local = Local()
    local.run("EMQ.ADD", b"caf\xe9\"\n", "x")
    samples = scrape(metrics_of(local))
    assert samples[("emqd_jobs", q("caf\\xe9\"\n", state="pending"))] == 1


def test_the_histograms_are_fed_by_the_events() -> None:
    local = Local()
    metrics = metrics_of(local)
    metrics.timings.listen([
        (CLAIMED, b"q", b"1", NOW, {"token": b"1", "wait_ms": 1500}),
        (CLAIMED, b"q", b"2", NOW, {"token": b"1", "wait_ms": 20}),
        (COMPLETED, b"q", b"1", NOW, {"duration_ms": 40}),
        (COMPLETED, b"q", b"2", NOW, None),  # no figure: not observed
        (DEAD, b"q", b"3", NOW, {"error": b"boom"}),
    ])
    samples = scrape(metrics)
    assert samples[("emqd_job_wait_seconds_count", q("q"))] == 2
    assert samples[("emqd_job_wait_seconds_sum", q("q"))] == pytest.approx(1.52)
    assert samples[("emqd_job_wait_seconds_bucket", q("q", le="1.0"))] == 1
    assert samples[("emqd_job_wait_seconds_bucket", q("q", le="2.5"))] == 2
    assert samples[("emqd_job_duration_seconds_count", q("q"))] == 1
    assert samples[("emqd_job_duration_seconds_bucket", q("q", le="0.05"))] == 1
    assert samples[("emqd_job_duration_seconds_bucket", q("q", le="0.025"))] == 0


def test_openmetrics_when_the_scraper_asks_for_it() -> None:
    body, content_type = metrics_of(Local()).exposition(
        "application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


@pytest.mark.parametrize("policy", ["always", "everysec"])
async def test_every_fsync_of_the_log_is_timed(tmp_path: Path, policy: str) -> None:
    local = Local()
    metrics = metrics_of(local)

    def slow_fsync(fd: int) -> None:
        time.sleep(0.003)
        os.fsync(fd)

    aof = AppendOnlyFile(str(tmp_path / "emqd.aof"), policy, 1 << 30, local.keyspace,
                         local.state.stats.fsyncs.add, fsync=slow_fsync)
    try:
        aof.append(Plan([(b"HSET", b"h", b"f", b"v")]))
        aof.flush()
        deadline = time.monotonic() + 5  # everysec: the thread's next second
        while scrape(metrics)[("emqd_aof_fsync_seconds_count", ())] < 1:
            assert time.monotonic() < deadline, "no fsync was observed"
            await asyncio.sleep(0.05)
        samples = scrape(metrics)
        assert samples[("emqd_aof_fsync_seconds_sum", ())] >= 0.003
        assert samples[("emqd_aof_fsync_seconds_bucket", (("le", "0.0025"),))] == 0
    finally:
        aof.close()


# --- the counters the core's plans will write (emqd/http/reading.py names them) ----------
def test_added_is_counted_by_add() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    assert scrape(metrics_of(local))[("emqd_jobs_added_total", q("q"))] == 1


def test_failed_retried_and_revived_are_counted() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("EMQ.CLAIM", "q", 30_000)
    assert local.run("EMQ.FAIL", "q", "1", "1", "MAXATTEMPTS", 2, "BACKOFF", 0) == [b"scheduled", 1]
    assert local.run("EMQ.PROMOTE", "q") == 1
    local.run("EMQ.CLAIM", "q", 30_000)
    assert local.run("EMQ.FAIL", "q", "1", "2", "MAXATTEMPTS", 2) == [b"dead", 2]
    assert local.run("EMQ.REVIVE", "q", "1") == "OK"
    samples = scrape(metrics_of(local))
    assert samples[("emqd_jobs_failures_total", q("q"))] == 2  # every FAIL
    assert ("emqd_jobs_failed_total", q("q")) not in samples  # its old, misleading name
    assert samples[("emqd_jobs_retried_total", q("q"))] == 1
    assert samples[("emqd_jobs_dead_total", q("q"))] == 1
    assert samples[("emqd_jobs_revived_total", q("q"))] == 1


def test_every_counter_has_one_name_in_stats_and_metrics() -> None:
    """issue 25, item 7: `emqd_jobs_failed_total` counted FAILs (279) where STATS'
    `failed_total` counted deaths (29). Each counter now has one name: STATS'
    `<name>_total` is /metrics' `emqd_jobs_<name>_total`, with the same value."""
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("EMQ.ADD", "q", "y")
    local.run("EMQ.CLAIM", "q", 30_000, "COUNT", 2)
    local.run("EMQ.FAIL", "q", "1", "1", "BACKOFF", 0)
    local.run("EMQ.FAIL", "q", "2", "1", "MAXATTEMPTS", 1)
    local.run("EMQ.REVIVE", "q", "2")
    stats = local.run("EMQ.STATS", "q")
    samples = scrape(metrics_of(local))
    for name in ("added", "completed", "dead", "failures", "retried", "stalled", "revived"):
        assert samples[(f"emqd_jobs_{name}_total", q("q"))] == stats[f"{name}_total".encode()]
    assert (stats[b"failures_total"], stats[b"dead_total"], stats[b"failed_total"]) == (2, 1, 1)


def test_counted_stalls_are_counted() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("EMQ.CLAIM", "q", 1)
    time.sleep(0.01)  # the 1 ms lease runs out
    assert local.run("EMQ.STALLED.CHECK", "q") == [[b"1"], []]
    assert scrape(metrics_of(local))[("emqd_jobs_stalled_total", q("q"))] == 1


def test_the_loop_lag_is_a_histogram_of_what_the_probe_saw() -> None:
    local = Local()
    lag = local.state.stats.loop_lag
    for ms in (0.4, 3.0, 700.0):  # two quick ticks and one stall
        lag.observe(ms, 1000.0)
    samples = scrape(metrics_of(local))
    assert samples[("emqd_loop_lag_seconds_count", ())] == 3
    assert samples[("emqd_loop_lag_seconds_bucket", (("le", "0.001"),))] == 1
    assert samples[("emqd_loop_lag_seconds_bucket", (("le", "0.5"),))] == 2
    assert samples[("emqd_loop_lag_seconds_bucket", (("le", "1.0"),))] == 3
    assert abs(samples[("emqd_loop_lag_seconds_sum", ())] - 0.7034) < 1e-9
