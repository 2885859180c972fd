"""The metrics history's stored form (emqd/rules/minutes.py): time codes, percentiles, records,
hour blocks and the bound; the close of a minute (emqd/verbs/minute_close.py), a planner."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.config import Config
from emqd.core import Core, Session
from emqd.dispatch import execute
from emqd.layout import queue_keys
from emqd.rules import minutes
from emqd.rules.minutes import Minute
from emqd.verbs import minute_close
from tests.verbs.jobs import P
from tests.verbs.planner import NOW, hash_of, keyspace, set_field

K = queue_keys(b"q")
HOUR = NOW // 60_000 // 60  # the hour NOW falls in, in hours since the epoch
M0 = HOUR * 60  # its first minute


# --- codes ---------------------------------------------------------------------------------
def test_a_code_stands_for_its_time_within_a_sixteenth() -> None:
    assert [minutes.code(ms) for ms in (0, 1, 15)] == [0, 1, 15]
    assert [minutes.value(minutes.code(ms)) for ms in (0, 1, 15)] == [0, 1, 15]
    assert minutes.code(-5) == 0
    for ms in [16, 17, 100, 999, 1000, 12_345, 60_000, 3_600_000, 86_400_000,
               *random.Random(38).sample(range(16, 10**10), 200)]:
        found = minutes.code(ms)
        assert 0 <= found <= 255
        assert abs(minutes.value(found) - ms) <= ms / 16, ms
    assert minutes.code(10**15) == 255  # beyond 2^34 ms: the last code


@given(st.integers(min_value=0, max_value=2**34))
@settings(max_examples=200, deadline=None)
def test_codes_keep_the_order_of_times(ms: int) -> None:
    assert minutes.code(ms) <= minutes.code(ms + 1)
    assert minutes.code(minutes.value(minutes.code(ms))) == minutes.code(ms)


def test_percentiles_are_the_nearest_ranks() -> None:
    histogram: dict[int, int] = {}
    for ms in range(1, 101):  # 1 .. 100 ms, once each
        key = minutes.code(ms)
        histogram[key] = histogram.get(key, 0) + 1
    p50, p95, p99 = minutes.percentiles(histogram)
    assert (p50, p95, p99) == (minutes.code(50), minutes.code(95), minutes.code(99))
    assert minutes.percentiles({}) is None
    assert minutes.percentiles({7: 1}) == (7, 7, 7)


# --- records and blocks --------------------------------------------------------------------
MINUTES = st.builds(
    Minute, st.integers(min_value=M0, max_value=M0 + 59), st.integers(0, 2**40),
    st.integers(0, 2**20), st.integers(0, 300),
    st.none() | st.tuples(*[st.integers(0, 255)] * 3),
    st.none() | st.tuples(*[st.integers(0, 255)] * 3))


@given(st.lists(MINUTES, max_size=5))
@settings(max_examples=100, deadline=None)
def test_a_block_gives_back_its_minutes(found: list[Minute]) -> None:
    records = b"".join(minutes.record(one) for one in found)
    encoded = minutes.block(HOUR, records) + minutes.block(HOUR + 1, b"")
    assert minutes.blocks(encoded) == [(HOUR, records), (HOUR + 1, b"")]
    assert minutes.minutes_of(HOUR, records) == found


@pytest.mark.parametrize("data", [b"\x80", b"\x01\x05ab", b"\x01"])
def test_a_block_not_in_the_form_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        minutes.blocks(data)


@pytest.mark.parametrize("records", [b"\xc0", b"\x01\x01\x01", b"\x41\x00\x00\x00\x01"])
def test_a_record_not_in_the_form_is_refused(records: bytes) -> None:
    with pytest.raises(ValueError):
        minutes.minutes_of(HOUR, records)


def test_a_busy_minute_is_at_most_fourteen_bytes_and_73_hours_of_them_fit() -> None:
    """35,000 completions, 16,000 failures and deaths a minute: 72 hours and the current one
    fit in the bound (a block's head is at most 6 bytes)."""
    busy = Minute(M0, 2**21 - 1, 2**14 - 1, 2**14 - 1, (200, 210, 220), (100, 120, 140))
    assert len(minutes.record(busy)) == 1 + 3 + 2 + 2 + 6
    assert 73 * (60 * 14 + 6) <= minutes.CAP


def test_kept_drops_the_hours_past_the_window_and_the_oldest_past_the_cap() -> None:
    record = minutes.record(Minute(M0, 1, 0, 0, None, None))
    old = b"".join(minutes.block(hour, record) for hour in range(HOUR - 80, HOUR))
    current = minutes.block(HOUR, record)
    assert [hour for hour, _ in minutes.blocks(minutes.kept(old, current))] == \
        list(range(HOUR - 72, HOUR))
    big = minutes.block(HOUR - 1, b"x" * (minutes.CAP - 10))
    assert minutes.kept(minutes.block(HOUR - 2, record) + big, current) == b""


# --- the close of a minute: a planner ----------------------------------------------------------
def close(space: object, minute: int, base: tuple = (0, 0, 0), wait: tuple | None = None,
          run: tuple | None = None) -> object:
    plan = minute_close.plan(minute_close.CloseArgs(K, minute, base, wait, run), space, NOW,
                             b"")
    space.apply(plan.ops)  # type: ignore[attr-defined]
    return plan


def stored(space: object) -> list[Minute]:
    row = hash_of(space, P + b"minutes") or {}
    found = []
    for field in (b"old", b"cur"):
        for hour, records in minutes.blocks(row.get(field)):
            found += minutes.minutes_of(hour, records)
    return found


def test_the_counts_are_the_counters_increases_since_the_minute_began() -> None:
    space = keyspace(**{"emq:{q}:metrics:completed": {"count": "12"},
                        "emq:{q}:metrics": {"failed": "5"},
                        "emq:{q}:metrics:failed": {"count": "2"}})
    plan = close(space, M0 + 3, base=(10, 4, 2), wait=(1, 2, 3))
    assert plan.reply == (12, 5, 2)  # the next minute's base
    assert plan.ops == [(b"HSET", P + b"minutes", b"cur",
                         minutes.block(HOUR, minutes.record(Minute(M0 + 3, 2, 1, 0, (1, 2, 3),
                                                                   None))))]
    assert stored(space) == [Minute(M0 + 3, 2, 1, 0, (1, 2, 3), None)]


def test_a_counter_that_went_down_starts_again_and_an_unreadable_one_counts_nothing() -> None:
    space = keyspace(**{"emq:{q}:metrics:completed": {"count": "3"},
                        "emq:{q}:metrics": {"failed": "x"}})
    plan = close(space, M0, base=(100, 7, 0))
    assert plan.reply == (3, 7, 0)
    assert stored(space) == [Minute(M0, 3, 0, 0, None, None)]


def test_a_minute_with_nothing_to_record_writes_nothing() -> None:
    space = keyspace(**{"emq:{q}:metrics:completed": {"count": "3"}})
    assert close(space, M0, base=(3, 0, 0)).ops == []


def test_minutes_append_merge_and_roll_into_old_by_the_hour() -> None:
    space = keyspace(**{"emq:{q}:metrics:completed": {"count": "1"}})
    close(space, M0 + 1)
    set_field(space, P + b"metrics:completed", b"count", b"3")
    close(space, M0 + 5, base=(1, 0, 0), run=(4, 4, 9))
    close(space, M0 + 5, base=(3, 0, 0), run=(6, 5, 7))  # a second record of minute 5
    close(space, M0 + 2, base=(3, 0, 0), wait=(1, 1, 1))  # out of order: in its place
    assert stored(space) == [Minute(M0 + 1, 1, 0, 0, None, None),
                             Minute(M0 + 2, 0, 0, 0, (1, 1, 1), None),
                             Minute(M0 + 5, 2, 0, 0, None, (6, 5, 9))]
    close(space, M0 + 61, base=(0, 0, 0))  # the next hour: `cur` moves on
    row = hash_of(space, P + b"minutes")
    assert [hour for hour, _ in minutes.blocks(row[b"old"])] == [HOUR]
    assert [hour for hour, _ in minutes.blocks(row[b"cur"])] == [HOUR + 1]
    before = dict(row)
    assert close(space, M0 + 10, base=(0, 0, 0)).ops == []  # an hour before `cur`'s: dropped
    assert hash_of(space, P + b"minutes") == before


def test_a_field_a_client_broke_starts_again() -> None:
    space = keyspace(**{"emq:{q}:minutes": {"cur": "\x80", "old": "junk"},
                        "emq:{q}:metrics:completed": {"count": "1"}})
    close(space, M0)
    assert stored(space) == [Minute(M0, 1, 0, 0, None, None)]


def test_three_days_of_the_busiest_minutes_stay_under_64_kib_a_queue() -> None:
    """The bound, measured as MEMORY USAGE measures it: every minute of 73 hours closed with
    counts in the billions (records of 19 bytes, worse than any queue can make)."""
    state = Core(Config(appendonly=False))
    base = (0, 0, 0)
    for minute in range(M0 - 73 * 60, M0 + 60):
        count = b"%d" % (base[0] + 2**30)
        state.keyspace.apply([(b"HSET", K.metrics_completed, b"count", count),
                              (b"HSET", K.metrics, b"failed", count),
                              (b"HSET", K.metrics_failed, b"count", count)])
        plan = minute_close.plan(minute_close.CloseArgs(K, minute, base, (9, 9, 9), (9, 9, 9)),
                                 state.keyspace, NOW, b"")
        state.keyspace.apply(plan.ops)
        base = plan.reply
    used = execute(Session(state), [b"MEMORY", b"USAGE", K.minutes])
    assert 60 * 1024 < used <= 64 * 1024
    row = hash_of(state.keyspace, K.minutes)
    assert len(row[b"old"]) + len(row[b"cur"]) <= minutes.CAP
    hours = [hour for hour, _ in minutes.blocks(row[b"old"])]
    assert hours == sorted(hours) and hours[-1] == HOUR - 1  # the oldest went first
