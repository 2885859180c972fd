"""EMQ.PROGRESS: one HSET of `progress`, its event, the guard; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit import events
from emqd.commit.plan import Plan
from emqd.verbs import progress
from tests.verbs.jobs import P, run, snapshot, wire_error, wire_snapshot
from tests.verbs.planner import NOW, drive, effects, held, keyspace

LIVE = {"state": "active", "attempts": "2", "payload": "p", "claimed_ms": "1"}


def test_plan_writes_only_the_progress_field() -> None:
    space = held(LIVE)
    result = drive(progress, ["emq.progress", "q", "1", "2", "50%"], space)
    assert effects(result) == effects(Plan([(b"HSET", P + b"job:1", b"progress", b"50%")], "OK"))
    assert result.events == [(events.PROGRESS, b"q", b"1", NOW, {"value": b"50%"})]
    assert result.due == ()
    assert run(progress, ["emq.progress", "q", "1", "2", b"x" * 4096], space) == "OK"


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1", "1", "5"], errors.STALE_GONE),
        ({"emq:{q}:job:1": {"state": "pending"}}, ["1", "1", "5"], errors.STALE_GONE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "1", "5"],
         errors.STALE_TOKEN),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "02", "5"],
         errors.STALE_TOKEN),  # compared as bytes
        ({"emq:{q}:job:1": {**LIVE, "state": "pending"}, "emq:{q}:pending": [("1", 0)]},
         ["1", "2", "5"], errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "2", b"x" * 4097],
         progress.VALUE_TOO_LONG),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": {"1": "x"}}, ["1", "2", "5"],
         errors.WRONGTYPE),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(progress, ["emq.progress", "q", *argv], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.CLAIM", "q", "60000")
    lease = r.zscore("emq:{q}:active", "1")
    assert r.execute_command("EMQ.PROGRESS", "q", "1", "1", '{"done": 3}') == b"OK"
    assert r.execute_command("EMQ.GET", "q", "1")[b"progress"] == b'{"done": 3}'
    assert r.zscore("emq:{q}:active", "1") == lease  # no lease change
    r.execute_command("EMQ.REQUEUE", "q", "1", "1")
    before = wire_snapshot(r)
    assert wire_error(r, "EMQ.PROGRESS", "q", "1", "1", "9") == "EMQSTALE job not active"
    assert wire_error(r, "EMQ.PROGRESS", "q", "1", "1", "x" * 4097) == (
        "VALUE exceeds 4096 bytes")
    assert wire_snapshot(r) == before
