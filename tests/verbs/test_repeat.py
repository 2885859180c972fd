"""Repeatable jobs: EMQ.REPEAT, EMQ.REPEAT.DEL, EMQ.REPEATS and the planner housekeeping
runs at each slot (emqd/verbs/repeat_fire.py), driven directly; the wire at the end."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

import pytest
import redis

from emqd import errors
from emqd.commit.plan import REPEATING, SCHEDULED, Plan
from emqd.config import Config
from emqd.verbs import repeat, repeat_del, repeat_fire, repeats
from tests.verbs.jobs import P, check_invariant, members, row, run, snapshot
from tests.verbs.planner import NOW, drive, hash_of, keyspace, set_field, sliced

SECOND = 1000


def fire(space: Any, now: int) -> Any:
    return run(sliced(repeat_fire), ["q"], space, now=now)


def test_a_schedule_is_a_hash_and_its_next_slot() -> None:
    space = keyspace()
    plan = drive(repeat, ["emq.repeat", "q", "tick", "EVERY", SECOND, "hello", "PRIORITY", "2",
                          "GROUP", "g"], space, now=NOW + 400)
    assert isinstance(plan, Plan)
    assert plan.reply == NOW + SECOND  # the first multiple of 1000 after now
    assert plan.due == ((REPEATING, b"q", NOW + SECOND),)
    space.apply(plan.ops)
    assert hash_of(space, P + b"repeat:tick") == {
        b"every": b"1000", b"payload": b"hello", b"priority": b"2", b"group": b"g",
        b"created_ms": b"%d" % (NOW + 400)}
    assert members(space, b"repeats") == [(b"tick", NOW + SECOND)]
    assert members(space, b"queues", b"emq:") == [(b"q", NOW + 400)]
    assert drive(repeats, ["emq.repeats", "q"], space) == [
        {b"name": b"tick", b"next_ms": NOW + SECOND, b"every": 1000, b"payload": b"hello",
         b"priority": b"2", b"group": b"g"}]


def test_each_slot_adds_one_job_named_by_it() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "tick", "EVERY", SECOND, "hello"], space)
    assert fire(space, NOW + SECOND - 1) == 0  # not yet
    assert fire(space, NOW + SECOND) == 1
    assert row(space, f"tick:{NOW + SECOND}") == {
        b"state": b"pending", b"payload": b"hello", b"created_ms": b"%d" % (NOW + SECOND),
        b"repeat": b"tick"}
    assert members(space, b"repeats") == [(b"tick", NOW + 2 * SECOND)]
    assert fire(space, NOW + SECOND + 500) == 0  # the next slot has not come
    assert fire(space, NOW + 2 * SECOND + 3) == 1
    assert [m for m, _ in members(space, b"pending")] == [b"tick:%d" % (NOW + s * SECOND)
                                                          for s in (1, 2)]
    check_invariant(space)


def test_slots_missed_while_down_give_one_catch_up_job() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "tick", "EVERY", SECOND, "x"], space)
    plan = drive(sliced(repeat_fire), ["q"], space, now=NOW + 10 * SECOND + 250)
    assert plan.reply == 1
    assert plan.due == ((REPEATING, b"q", NOW + 11 * SECOND),)
    space.apply(plan.ops)
    assert [m for m, _ in members(space, b"pending")] == [b"tick:%d" % (NOW + 10 * SECOND)]


def test_no_slot_is_added_twice_even_when_the_schedule_is_replaced() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "tick", "EVERY", SECOND, "x"], space)
    fire(space, NOW + SECOND)
    # replaced at the same moment, and its index put back by hand: the id is taken
    run(repeat, ["emq.repeat", "q", "tick", "EVERY", SECOND, "y"], space, now=NOW + SECOND)
    space.apply([(b"ZADD", P + b"repeats", NOW + SECOND, b"tick")])
    before = len(members(space, b"pending"))
    assert fire(space, NOW + SECOND) == 0
    assert len(members(space, b"pending")) == before
    assert members(space, b"repeats") == [(b"tick", NOW + 2 * SECOND)]


def test_a_schedules_job_takes_its_options_and_its_lane() -> None:
    space = keyspace()
    slot = run(repeat, ["emq.repeat", "q", "r", "EVERY", 60_000, "x", "GROUP", "acme",
                        "MAXATTEMPTS", "5", "BACKOFF", "exp:10"], space)
    assert slot % 60_000 == 0
    fire(space, slot)
    job = row(space, f"r:{slot}")
    assert job[b"group"] == b"acme" and job[b"max_attempts"] == b"5"
    assert job[b"backoff"] == b"exp:10"
    assert [m for m, _ in members(space, b"lane:acme")] == [b"r:%d" % slot]


def test_cron_in_a_time_zone() -> None:
    space = keyspace()
    now = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC, 23:13:20 in Paris
    first = run(repeat, ["emq.repeat", "q", "daily", "CRON", "30 7 * * *", "TZ",
                         "Europe/Paris", "x"], space, now=now)
    when = datetime.datetime.fromtimestamp(first / 1000, zoneinfo.ZoneInfo("Europe/Paris"))
    assert (when.day, when.hour, when.minute) == (15, 7, 30)
    assert fire(space, first) == 1
    following = members(space, b"repeats")[0][1]
    assert following - first == 24 * 3600 * 1000
    assert hash_of(space, P + b"repeat:daily")[b"tz"] == b"Europe/Paris"


def test_repeat_del_and_replace() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "a", "CRON", "* * * * *", "TZ", "UTC", "x"], space)
    run(repeat, ["emq.repeat", "q", "a", "EVERY", 5000, "y"], space)  # replaced: no tz left
    assert set(hash_of(space, P + b"repeat:a")) == {b"every", b"payload", b"created_ms"}
    assert run(repeat_del, ["emq.repeat.del", "q", "a"], space) == 1
    assert run(repeat_del, ["emq.repeat.del", "q", "a"], space) == 0
    assert space.type_name(P + b"repeats") == space.type_name(P + b"repeat:a") == "none"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["q", "n", "EVERY", "0", "x"], errors.must_be_positive("EVERY")),
        (["q", "n", "EVERY", "1000"], errors.SYNTAX),
        (["q", "n", "HOURLY", "1000", "x"], errors.SYNTAX),
        (["q", "", "EVERY", "1000", "x"], errors.INVALID_SCHEDULE),
        (["q", "n" * 201, "EVERY", "1000", "x"], errors.INVALID_SCHEDULE),
        (["q", "n", "EVERY", "1000", "x", "ID", "a"], errors.SYNTAX),
        (["q", "n", "EVERY", "1000", "x", "DELAY", "5"], errors.SYNTAX),
        (["q", "n", "EVERY", "1000", "x", "PRIORITY", "2000"], errors.PRIORITY_RANGE),
        (["q", "n", "CRON", "61 * * * *", "x"],
         errors.invalid_cron("[61 * * * *] is not acceptable, out of range")),
        (["q", "n", "CRON", "* *", "x"], errors.invalid_cron(
            "Exactly 5, 6 or 7 columns has to be specified for iterator expression.")),
        (["q", "n", "CRON", "0 0 30 2 *", "x"], errors.invalid_cron("failed to find next date")),
        (["q", "n", "CRON", "* * * * *", "TZ", "Mars/Olympus", "x"],
         errors.invalid_zone(b"Mars/Olympus")),
        (["q", "n", "EVERY", str(2**62), "x"], errors.invalid_time("EVERY", "emq.repeat")),
    ],
)
def test_refusals_write_nothing(argv: list, error: Any) -> None:
    space = keyspace()
    before = snapshot(space)
    assert drive(repeat, ["emq.repeat", *argv], space) == error
    assert snapshot(space) == before


def test_a_corrupt_schedule_refuses_the_slice_and_a_gone_one_leaves_the_index() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "a", "EVERY", SECOND, "x"], space)
    run(repeat, ["emq.repeat", "q", "b", "EVERY", SECOND, "x"], space)
    set_field(space, P + b"repeat:a", b"every", b"soon")
    before = snapshot(space)
    assert drive(sliced(repeat_fire), ["q"], space, now=NOW + SECOND) == \
        errors.corrupt_schedule(b"a")
    assert snapshot(space) == before
    space.apply([(b"DEL", P + b"repeat:a")])
    assert fire(space, NOW + SECOND) == 1
    assert [m for m, _ in members(space, b"repeats")] == [b"b"]


def test_a_scheduled_jobs_due_time_reaches_housekeeping() -> None:
    space = keyspace()
    run(repeat, ["emq.repeat", "q", "a", "EVERY", SECOND, "x", "PRIORITY", "1"], space)
    plan = drive(sliced(repeat_fire), ["q"], space, now=NOW + SECOND)
    assert all(what != SCHEDULED for what, _, _ in plan.due)  # its job is due at once
    assert repeat_fire.slice_args(b"q", 3, Config()).limit == 3


def test_over_the_wire(r: redis.Redis) -> None:
    first = r.execute_command("EMQ.REPEAT", "mail", "digest", "CRON", "0 8 * * 1", "weekly")
    assert isinstance(first, int)
    [entry] = r.execute_command("EMQ.REPEATS", "mail")
    assert entry == {b"name": b"digest", b"next_ms": first, b"cron": b"0 8 * * 1",
                     b"payload": b"weekly"}
    with pytest.raises(redis.ResponseError, match="invalid cron expression"):
        r.execute_command("EMQ.REPEAT", "mail", "digest", "CRON", "every monday", "x")
    assert r.execute_command("EMQ.REPEAT.DEL", "mail", "digest") == 1
    assert r.execute_command("EMQ.REPEATS", "mail") == []
