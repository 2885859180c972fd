"""EMQ.REVIVE: a dead job back at the front of its band; RESET; refusals; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import revive
from tests.verbs.jobs import P, check_invariant, members, row, run, snapshot, wire_error
from tests.verbs.planner import NOW, drive, effects, keyspace

DEAD = {"state": "dead", "attempts": "3", "failures": "3", "stalled": "1", "last_error": "e",
        "priority": "-1"}


def dead_space(**extra: object):  # type: ignore[no-untyped-def]
    return keyspace(**{"emq:{q}:job:1": dict(DEAD), "emq:{q}:dead": [("1", 5)], **extra})


def test_plan() -> None:
    assert effects(drive(revive, ["emq.revive", "q", "1"], dead_space())) == effects(Plan(
        [
            (b"ZREM", P + b"dead", b"1"),
            (b"HSET", P + b"job:1", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", -(2**40), b"1"),
            (b"HSET", P + b"metrics", b"revived", b"1"),
        ],
        "OK",
    ))


def test_counters_kept_without_reset_and_deleted_with_it() -> None:
    space = dead_space()
    assert run(revive, ["emq.revive", "q", "1"], space) == "OK"
    assert row(space, "1") == {**{k.encode(): v.encode() for k, v in DEAD.items()},
                               b"state": b"pending", b"ready_ms": b"%d" % NOW}
    check_invariant(space)
    space = dead_space()
    assert run(revive, ["emq.revive", "q", "1", "reset"], space) == "OK"
    assert b"failures" not in row(space, "1") and b"stalled" not in row(space, "1")
    assert row(space, "1")[b"attempts"] == b"3"  # the token is never reset
    assert members(space, b"pending") == [(b"1", float(-(2**40)))]
    check_invariant(space)


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1"], errors.STATE_NOT_DEAD),
        ({"emq:{q}:job:1": {"state": "active"}, "emq:{q}:active": [("1", 1)]}, ["1"],
         errors.STATE_NOT_DEAD),
        ({"emq:{q}:job:1": {"state": "completed"}}, ["1"], errors.STATE_NOT_DEAD),
        ({"emq:{q}:job:1": {**DEAD, "priority": "p"}, "emq:{q}:dead": [("1", 1)]}, ["1"],
         errors.corrupt_job_field(b"priority")),
        ({"emq:{q}:job:1": DEAD, "emq:{q}:dead": {"a": "b"}}, ["1"], errors.WRONGTYPE),
        ({"emq:{q}:job:1": DEAD, "emq:{q}:dead": [("1", 1)]}, ["1", "RESET", "RESET"],
         errors.SYNTAX),
        ({"emq:{q}:job:1": DEAD, "emq:{q}:dead": [("1", 1)]}, ["1", "NOW"], errors.SYNTAX),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(revive, ["emq.revive", "q", *argv], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a", "MAXATTEMPTS", "1")
    r.execute_command("EMQ.CLAIM", "q", "1000")
    assert r.execute_command("EMQ.FAIL", "q", "1", "1") == [b"dead", 1]
    assert wire_error(r, "EMQ.REVIVE", "q", "2") == "EMQSTATE job is not dead"
    assert r.execute_command("EMQ.REVIVE", "q", "1", "RESET") == b"OK"
    assert wire_error(r, "EMQ.REVIVE", "q", "1") == "EMQSTATE job is not dead"
    assert r.execute_command("EMQ.CLAIM", "q", "1000") == [b"1", b"2", b"a", 0]
