"""EMQ.REMOVE: row and set entry of a job that is not active; 0 for no job; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import remove
from tests.verbs.jobs import P, run, snapshot, wire_error
from tests.verbs.planner import drive, effects, keyspace


@pytest.mark.parametrize("state", ["pending", "scheduled", "dead", "completed"])
def test_removes_row_and_set_entry(state: str) -> None:
    space = keyspace(**{"emq:{q}:job:1": {"state": state},
                        f"emq:{{q}}:{state}": [("1", 1), ("2", 2)]})
    assert effects(drive(remove, ["emq.remove", "q", "1"], space)) == effects(Plan(
        [(b"DEL", P + b"job:1"), (b"ZREM", P + state.encode(), b"1")], 1))
    assert run(remove, ["emq.remove", "q", "1"], space) == 1
    assert list(space.data) == [P + state.encode()]
    assert run(remove, ["emq.remove", "q", "1"], space) == 0


def test_no_such_job_writes_nothing() -> None:
    assert effects(drive(remove, ["emq.remove", "q", "1"], keyspace())) == effects(Plan([], 0))


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"emq:{q}:job:1": {"state": "active"}, "emq:{q}:active": [("1", 1)]},
         errors.STATE_ACTIVE),
        ({"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:active": [("1", 1)]},
         errors.STATE_ACTIVE),
        ({"emq:{q}:job:1": [("x", 1)]}, errors.WRONGTYPE),
        ({"emq:{q}:job:1": {"state": "dead"}, "emq:{q}:dead": {"x": "y"}}, errors.WRONGTYPE),
    ],
)
def test_refusals_write_nothing(data: dict, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(remove, ["emq.remove", "q", "1"], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.ADD", "q", "b")
    r.execute_command("EMQ.CLAIM", "q", "60000")
    assert wire_error(r, "EMQ.REMOVE", "q", "1") == "EMQSTATE job is active"
    assert r.execute_command("EMQ.REMOVE", "q", "2") == 1
    assert r.exists("emq:{q}:job:2", "emq:{q}:pending") == 0
    assert r.execute_command("EMQ.REMOVE", "q", "2") == 0
    assert r.execute_command("EMQ.ADD", "q", "again", "ID", "2") == b"2"  # a new job
    assert r.hget("emq:{q}:job:2", "payload") == b"again"
