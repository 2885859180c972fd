"""emqd/http/reading.py: the figures after known plans, paging, the bounded search."""

from __future__ import annotations

import pytest

from emqd.http import reading
from emqd.layout import queue_keys
from tests.http.inprocess import Local

NOW = 10**13  # far after every created_ms of these tests


def test_counts_per_state_after_known_plans() -> None:
    local = Local()
    for i in range(5):
        local.run("EMQ.ADD", "q", f"p{i}")
    local.run("EMQ.ADD", "q", "later", "DELAY", 60_000)
    assert local.run("EMQ.CLAIM", "q", 30_000, "COUNT", 3) != []
    assert local.run("EMQ.COMPLETE", "q", "1", "1") == "OK"
    assert local.run("EMQ.FAIL", "q", "2", "1", "MAXATTEMPTS", 1) == [b"dead", 1]
    assert local.run("EMQ.CANCEL", "q", "4") == b"pending"
    figures = reading.queue_figures(local.keyspace, b"q", NOW)
    assert figures.counts == {"pending": 1, "active": 1, "scheduled": 1, "waiting": 0, "dead": 1,
                              "completed": 1, "cancelled": 1}
    assert (figures.totals["completed"], figures.totals["dead"]) == (1, 1)
    assert figures.totals["cancelled"] == 1
    assert figures.paused is False and reading.queue_names(local.keyspace) == [b"q"]


def test_pending_counts_the_lanes_and_the_lane_figures() -> None:
    local = Local()
    local.run("EMQ.ADD", "r", "flat")
    for group in ("acme", "acme", "beta"):
        local.run("EMQ.ADD", "r", "x", "GROUP", group)
    local.run("EMQ.CLAIM", "r", 30_000)  # acme's first job: acme is full (lane_limit 1)
    figures = reading.queue_figures(local.keyspace, b"r", NOW)
    assert figures.counts["pending"] == 3 and figures.counts["active"] == 1
    assert (figures.lanes_active, figures.lanes_ready) == (1, 1)  # acme runs, beta waits


def test_latency_is_the_age_of_the_next_job_and_zero_when_none_waits() -> None:
    local = Local()
    assert reading.queue_figures(local.keyspace, b"q", NOW).latency_ms == 0
    local.run("EMQ.ADD", "q", "a", "ID", "old")
    local.run("HSET", "emq:{q}:job:old", "created_ms", NOW - 5000)
    local.run("EMQ.ADD", "q", "b")
    assert reading.queue_figures(local.keyspace, b"q", NOW).latency_ms == 5000
    local.run("EMQ.CLAIM", "q", 30_000, "COUNT", 2)
    assert reading.queue_figures(local.keyspace, b"q", NOW).latency_ms == 0


def test_the_next_lane_counts_for_the_latency() -> None:
    local = Local()
    local.run("EMQ.ADD", "r", "flat", "ID", "f")
    local.run("EMQ.ADD", "r", "lane", "ID", "g", "GROUP", "acme")
    local.run("HSET", "emq:{r}:job:g", "created_ms", NOW - 9000)
    local.run("HSET", "emq:{r}:job:f", "created_ms", NOW - 1000)
    assert reading.queue_figures(local.keyspace, b"r", NOW).latency_ms == 9000


def test_the_new_counters_are_read_where_the_core_keeps_them() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("HSET", "emq:{q}:meta", "added", 7)
    local.run("HSET", "emq:{q}:metrics", "failed", 5, "retried", 4, "stalled", 3, "revived", 2,
              "cancelled", 6)
    totals = reading.queue_figures(local.keyspace, b"q", NOW).totals
    assert totals == {"added": 7, "completed": 0, "failures": 5, "retried": 4, "dead": 0,
                      "stalled": 3, "revived": 2, "cancelled": 6}


def test_a_stored_value_a_client_broke_skips_only_that_figure() -> None:
    local = Local()
    local.run("EMQ.ADD", "q", "x")
    local.run("HSET", "emq:{q}:metrics:completed", "count", "lots")
    local.run("HSET", "emq:{q}:meta", "lanes_pending", "-")
    local.run("ZADD", "emq:{q}:gactive", 1, "a")  # a hash's key holding a sorted set
    assert local.run("HSET", "emq:{q}:dead", "f", "v") == 1
    local.run("HSET", "emq:{q}:job:1", "created_ms", "yesterday")
    figures = reading.queue_figures(local.keyspace, b"q", NOW)
    assert figures.totals["completed"] is None and figures.totals["dead"] == 0
    assert figures.counts["pending"] is None and figures.counts["dead"] is None
    assert figures.counts["active"] == 0
    assert figures.lanes_active is None and figures.latency_ms is None


def test_a_queue_exists_once_listed_or_steered() -> None:
    local = Local()
    assert not reading.queue_exists(local.keyspace, b"q")
    local.run("EMQ.PAUSE", "q")
    assert reading.queue_exists(local.keyspace, b"q")
    local.run("EMQ.ADD", "other", "x")
    assert reading.queue_exists(local.keyspace, b"other")


def test_pages_are_newest_first_and_cover_the_set_once() -> None:
    local = Local()
    for i in range(1, 8):
        local.run("EMQ.ADD", "q", f"p{i}")
    local.run("DEL", "emq:{q}:job:3")  # a ghost: listed, without a row
    total, first = reading.job_page(local.keyspace, b"q", "pending", 0, 3)
    _, second = reading.job_page(local.keyspace, b"q", "pending", 3, 3)
    _, third = reading.job_page(local.keyspace, b"q", "pending", 6, 3)
    _, beyond = reading.job_page(local.keyspace, b"q", "pending", 9, 3)
    assert total == 7 and beyond == []
    assert [j.id for j in first + second + third] == [b"7", b"6", b"5", b"4", b"3", b"2", b"1"]
    assert first[0].row is not None and first[0].row[b"payload"] == b"p7"
    assert second[1].row is None


def test_the_oldest_are_the_lowest_scores() -> None:
    local = Local()
    for i in range(1, 5):
        local.run("EMQ.ADD", "q", f"p{i}")
    assert reading.oldest(local.keyspace, b"q", "pending", 2) == [b"1", b"2"]


def test_search_finds_substrings_newest_first_and_resumes() -> None:
    local = Local()
    for i in range(1, 11):
        local.run("EMQ.ADD", "q", f"{{\"n\": {i}, \"tag\": \"{'red' if i % 2 else 'blue'}\"}}")
    found = reading.search_payloads(local.keyspace, b"q", "pending", b"red", 0, 2)
    assert [j.id for j in found.jobs] == [b"9", b"7"] and found.scanned == 4
    rest = reading.search_payloads(local.keyspace, b"q", "pending", b"red", found.resume, 10)
    assert [j.id for j in rest.jobs] == [b"5", b"3", b"1"] and rest.resume is None


def test_search_looks_at_a_bounded_number_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "SEARCH_ROWS", 4)
    local = Local()
    for i in range(1, 11):
        local.run("EMQ.ADD", "q", "needle" if i == 1 else "hay")
    found = reading.search_payloads(local.keyspace, b"q", "pending", b"needle", 0, 50)
    assert found.jobs == [] and found.scanned == 4 and found.resume == 4
    found = reading.search_payloads(local.keyspace, b"q", "pending", b"needle", 8, 50)
    assert [j.id for j in found.jobs] == [b"1"] and found.resume is None


def test_search_stops_at_its_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "SEARCH_BYTES", 25)
    local = Local()
    for _ in range(5):
        local.run("EMQ.ADD", "q", "x" * 10)
    found = reading.search_payloads(local.keyspace, b"q", "pending", b"y", 0, 50)
    assert found.scanned == 3 and found.resume == 3


def test_an_unknown_state_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        reading.set_key(b"q", "lost")
    assert queue_keys(b"q").dead == reading.set_key(b"q", "dead")
