"""EMQ.REQUEUE: exactly three writes, the front of the band, no counter; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.plan import Plan
from emqd.verbs import requeue
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    claim_one,
    members,
    row,
    run,
    snapshot,
    wire_error,
    wire_snapshot,
)
from tests.verbs.planner import NOW, drive, effects, held, keyspace

LIVE = {"state": "active", "attempts": "3", "failures": "1", "stalled": "1", "payload": "x",
        "last_error": "e", "claimed_ms": "1"}


def test_exactly_three_writes() -> None:
    space = held(LIVE, deadline=NOW)
    assert effects(drive(requeue, ["emq.requeue", "q", "1", "3"], space)) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", 0, b"1"),
        ],
        "OK",
    ))


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
    assert wire_error(r, "EMQ.REQUEUE", "q", "1", "1", "x") == (
        "wrong number of arguments for 'emq.requeue' command")
    assert wire_snapshot(r) == before
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:2] == [b"1", b"2"]
