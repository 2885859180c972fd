"""EMQ.REQUEUE: exactly three writes, the front of the band, no counter; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import SCHEDULED, Plan
from emqd.reply import NULL_ARRAY
from emqd.verbs import claim, complete, promote, requeue
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    check_lanes,
    claim_one,
    members,
    row,
    run,
    snapshot,
    wire_error,
    wire_snapshot,
)
from tests.verbs.planner import NOW, drive, effects, hash_of, held, keyspace

LIVE = {"state": "active", "attempts": "3", "failures": "1", "stalled": "1", "payload": "x",
        "last_error": "e", "claimed_ms": "1"}


def test_exactly_three_writes() -> None:
    """As docs/PROTOCOL.md says: the HSET sets `state` and `ready_ms`, and the only other
    effect is the `recovered` event (no metrics hash, no counter)."""
    space = held(LIVE, deadline=NOW)
    plan = drive(requeue, ["emq.requeue", "q", "1", "3"], space)
    assert effects(plan) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", 0, b"1"),
        ],
        "OK",
    ))
    assert plan.events == [("recovered", b"q", b"1", NOW, None)]


def test_counters_untouched_and_front_of_the_band() -> None:
    space = keyspace()
    add_jobs(space, 3)
    add_jobs(space, 1, "PRIORITY", "-1")  # job 4 is ahead of the priority-0 band
    job_id, token, _, _ = claim_one(space)
    assert job_id == b"4"
    before = dict(row(space, "4"))
    assert run(requeue, ["emq.requeue", "q", job_id, token], space) == "OK"
    after = row(space, "4")
    assert after == {**before, b"state": b"pending", b"ready_ms": b"%d" % NOW}  # its wait
    assert members(space, b"pending")[0] == (b"4", float(-(2**40)))
    job_id, token, _, _ = claim_one(space)  # back at the front of its band, token one higher
    assert (job_id, token) == (b"4", b"2")
    run(requeue, ["emq.requeue", "q", "4", "2"], space)
    claim_one(space)
    job_id, token, _, _ = claim_one(space)
    assert job_id == b"1"
    assert run(requeue, ["emq.requeue", "q", "1", "1"], space) == "OK"
    assert members(space, b"pending")[0] == (b"1", 0.0)  # ahead of 2 and 3 (scores 2, 3)
    check_invariant(space)


@pytest.mark.parametrize(
    ("data", "token", "error"),
    [
        ({}, "1", errors.STALE_GONE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, "2", errors.STALE_TOKEN),
        ({"emq:{q}:job:1": {**LIVE, "state": "pending"}, "emq:{q}:pending": [("1", 0)]}, "3",
         errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": {**LIVE, "priority": "2000"}, "emq:{q}:active": [("1", 1)]}, "3",
         errors.corrupt_job_field(b"priority")),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)], "emq:{q}:pending": {"a": "b"}},
         "3", errors.WRONGTYPE),
    ],
)
def test_refusals_write_nothing(data: dict, token: str, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(requeue, ["emq.requeue", "q", "1", token], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:2] == [b"1", b"1"]
    assert r.execute_command("EMQ.REQUEUE", "q", "1", "1") == b"OK"
    assert r.hgetall("emq:{q}:job:1")[b"state"] == b"pending"
    assert b"failures" not in r.hgetall("emq:{q}:job:1")
    before = wire_snapshot(r)
    assert wire_error(r, "EMQ.REQUEUE", "q", "1", "1") == "EMQSTALE job not active"
    assert wire_error(r, "EMQ.REQUEUE", "q", "1", "1", "x") == "syntax error"
    assert wire_error(r, "EMQ.REQUEUE", "q", "1") == (
        "wrong number of arguments for 'emq.requeue' command")
    assert wire_snapshot(r) == before
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:2] == [b"1", b"2"]


# --- a snooze: REQUEUE ... DELAY ms -----------------------------------------------------
def test_a_snooze_waits_in_scheduled_and_spends_no_budget() -> None:
    space = held(LIVE, deadline=NOW)
    plan = drive(requeue, ["emq.requeue", "q", "1", "3", "DELAY", "30000"], space)
    assert effects(plan) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"state", b"scheduled"),
            (b"ZADD", P + b"scheduled", NOW + 30_000, b"1"),
        ],
        "OK",
    ))
    assert plan.events == [("snoozed", b"q", b"1", NOW, {"due_ms": NOW + 30_000})]
    assert plan.due == ((SCHEDULED, b"q", NOW + 30_000),)
    before = row(space, "1")
    run(requeue, ["emq.requeue", "q", "1", "3", "DELAY", "30000"], space)
    assert row(space, "1") == {**before, b"state": b"scheduled"}  # failures, stalled untouched
    check_invariant(space)


def test_snoozed_twice_then_completed_its_failures_stay_zero() -> None:
    """The issue's case: snooze twice then complete; attempts rises at each claim, failures
    never; promotion puts it at the front of its band, as a retry."""
    space = keyspace()
    add_jobs(space, 2)
    now = NOW
    for token in (b"1", b"2"):
        job_id, claimed, _, failures = claim_one(space, now=now)
        assert (job_id, claimed, failures) == (b"1", token, 0)
        assert run(requeue, ["emq.requeue", "q", job_id, claimed, "DELAY", 500], space,
                   now=now) == "OK"
        assert members(space, b"scheduled") == [(b"1", now + 500)]
        other, other_token, _, _ = claim_one(space, now=now)
        assert other == b"2"  # the snoozed job is not claimable yet
        run(requeue, ["emq.requeue", "q", other, other_token], space, now=now)
        now += 500
        assert run(promote, ["emq.promote", "q"], space, now=now) == 1
        assert members(space, b"pending")[0] == (b"1", 0.0)  # the front, ahead of job 2
    job_id, token, _, failures = claim_one(space, now=now)
    assert (job_id, token, failures) == (b"1", b"3", 0)
    assert run(complete, ["emq.complete", "q", job_id, token], space, now=now) == "OK"
    assert b"failures" not in row(space, "1") and b"stalled" not in row(space, "1")
    check_invariant(space)


def test_a_lane_job_snoozed_gives_its_slot_back_and_returns_to_its_lane() -> None:
    space = keyspace()
    add_jobs(space, 2, "GROUP", "g")
    job_id, token, _, _ = claim_one(space)
    assert run(claim, ["emq.claim", "q", 1000], space) is NULL_ARRAY
    run(requeue, ["emq.requeue", "q", job_id, token, "DELAY", 100], space)
    assert hash_of(space, P + b"gactive") is None  # the slot is free: job 2 can run
    assert claim_one(space)[0] == b"2"
    run(promote, ["emq.promote", "q"], space, now=NOW + 100)
    assert members(space, b"lane:g") == [(b"1", 0.0)]
    check_invariant(space)
    check_lanes(space)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["DELAY", "-1"], errors.must_be_non_negative("DELAY")),
        (["DELAY", "x"], errors.must_be_non_negative("DELAY")),
        (["DELAY"], errors.SYNTAX),
        (["DELAY", "1", "DELAY", "2"], errors.SYNTAX),
        (["WAIT", "1"], errors.SYNTAX),
        (["DELAY", str(2**53)], errors.invalid_time("DELAY", "emq.requeue")),
    ],
)
def test_a_bad_delay_is_refused_and_writes_nothing(argv: list, error: errors.ReplyError) -> None:
    space = held(LIVE, deadline=NOW)
    before = snapshot(space)
    assert drive(requeue, ["emq.requeue", "q", "1", "3", *argv], space) == error
    assert snapshot(space) == before


def test_a_snooze_over_the_wire_comes_back_by_itself(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "1000")
    assert r.execute_command("EMQ.REQUEUE", "q", job_id, token, "DELAY", "200") == b"OK"
    assert r.hget("emq:{q}:job:1", "state") == b"scheduled"
    assert wire_error(r, "EMQ.REQUEUE", "q", job_id, token, "DELAY", "1") == \
        "EMQSTALE job not active"
    reply = r.execute_command("EMQ.CLAIM", "q", "1000", "BLOCK", "5000")  # woken by promotion
    assert reply[:2] == [b"1", b"2"] and reply[3] == 0
