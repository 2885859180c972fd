"""EMQ.EXTEND: the new deadline and the current epoch; the guard; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import extend
from tests.verbs.jobs import P, members, row, run, snapshot, wire_error, wire_snapshot
from tests.verbs.planner import NOW, OTHER_RUN_ID, RUN_ID, drive, effects, keyspace

LIVE = {"state": "active", "attempts": "1", "lease_epoch": OTHER_RUN_ID.decode(),
        "claimed_ms": "1"}


def test_plan_and_reply() -> None:
    space = keyspace(**{"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", NOW - 5)]})
    assert effects(drive(extend, ["emq.extend", "q", "1", "1", "250"], space)) == effects(Plan(
        [(b"ZADD", P + b"active", NOW + 250, b"1"),
         (b"HSET", P + b"job:1", b"lease_epoch", RUN_ID)],
        NOW + 250,
    ))
    assert run(extend, ["emq.extend", "q", "1", "1", "250"], space) == NOW + 250
    assert members(space, b"active") == [(b"1", NOW + 250)]
    assert row(space, "1")[b"lease_epoch"] == RUN_ID  # a lease extended now is this process's


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1", "1", "10"], errors.STALE_GONE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "2", "10"],
         errors.STALE_TOKEN),
        ({"emq:{q}:job:1": {**LIVE, "state": "dead"}, "emq:{q}:dead": [("1", 1)]},
         ["1", "1", "10"], errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "1", "0"],
         errors.must_be_positive("LEASE_MS")),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "1", "+5"],
         errors.must_be_positive("LEASE_MS")),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(extend, ["emq.extend", "q", *argv], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.CLAIM", "q", "1000")
    deadline = r.execute_command("EMQ.EXTEND", "q", "1", "1", "60000")
    assert isinstance(deadline, int)
    epoch = r.execute_command("EMQ.EPOCH")
    assert r.hget("emq:{q}:job:1", "lease_epoch") == epoch
    before = wire_snapshot(r)
    assert wire_error(r, "EMQ.EXTEND", "q", "1", "2", "10") == "EMQSTALE token mismatch"
    assert wire_error(r, "EMQ.EXTEND", "q", "1", "1", "-1") == (
        "LEASE_MS must be a positive integer")
    assert wire_snapshot(r) == before
