"""EMQ.COMPLETE: the guard, the plan, retention of `completed`; then over the wire."""

from __future__ import annotations

import pytest
import redis
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.rules import job
from emqd.rules import settings as queue_settings
from emqd.verbs import complete
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
from tests.verbs.planner import NOW, RUN_ID, drive, effects, hash_of, held, keyspace

ACTIVE_ROW = {"state": "active", "attempts": "1", "payload": "x", "claimed_ms": "1"}


def test_plan() -> None:
    planned = drive(complete, ["emq.complete", "q", "1", "1"], held(ACTIVE_ROW))
    assert effects(planned) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"state", b"completed", b"finished_ms", b"%d" % NOW),
            (b"ZADD", P + b"completed", NOW, b"1"),
            (b"HSET", P + b"metrics:completed", b"count", b"1"),
        ],
        "OK",
    ))


def test_result_is_stored_and_the_job_is_in_completed_only() -> None:
    space = keyspace()
    add_jobs(space, 1)
    claim_one(space)
    assert run(complete, ["emq.complete", "q", "1", "1", "RESULT", "r\x00"], space) == "OK"
    assert row(space, "1")[b"result"] == b"r\x00"
    assert row(space, "1")[b"state"] == b"completed"
    assert hash_of(space, P + b"metrics:completed") == {b"count": b"1"}
    check_invariant(space)


@pytest.mark.parametrize(
    ("data", "token", "error"),
    [
        ({}, "1", errors.STALE_GONE),  # no row
        ({"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:pending": [("1", 1)]}, "1",
         errors.STALE_GONE),  # never claimed
        ({"emq:{q}:job:1": ACTIVE_ROW, "emq:{q}:active": [("1", 1)]}, "2", errors.STALE_TOKEN),
        ({"emq:{q}:job:1": ACTIVE_ROW, "emq:{q}:active": [("1", 1)]}, "01", errors.STALE_TOKEN),
        ({"emq:{q}:job:1": {**ACTIVE_ROW, "state": "pending"}, "emq:{q}:pending": [("1", 0)]},
         "1", errors.STALE_NOT_ACTIVE),  # recovered: its old holder comes back
        ({"emq:{q}:job:1": ACTIVE_ROW}, "1", errors.STALE_NOT_ACTIVE),  # not in active
        ({"emq:{q}:job:1": {**ACTIVE_ROW, "state": "completed"},
          "emq:{q}:completed": [("1", 1)]}, "1", errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": [("a", 1)]}, "1", errors.WRONGTYPE),
        ({"emq:{q}:job:1": ACTIVE_ROW, "emq:{q}:active": [("1", 1)],
          "emq:{q}:metrics:completed": {"count": "1.5"}}, "1", errors.HASH_NOT_INTEGER),
        ({"emq:{q}:job:1": ACTIVE_ROW, "emq:{q}:active": [("1", 1)],
          "emq:{q}:completed": {"a": "b"}}, "1", errors.WRONGTYPE),
        ({"emq:{q}:job:1": ACTIVE_ROW, "emq:{q}:active": [("1", 1)],
          "emq:{q}:config": {"keep_completed": "-1"}}, "1",
         errors.corrupt_setting(b"keep_completed")),
    ],
)
def test_refusals_write_nothing(data: dict, token: str, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(complete, ["emq.complete", "q", "1", token], space) == error
    assert snapshot(space) == before


@pytest.mark.parametrize(
    "argv",
    [["q", "1", "1", "RESULT"], ["q", "1", "1", "RESULT", "a", "RESULT", "b"],
     ["q", "1", "1", "X", "y"]],
)
def test_syntax(argv: list) -> None:
    assert drive(complete, ["emq.complete", *argv], held(ACTIVE_ROW)) == errors.SYNTAX


def _finished(n: int, start: int = 100) -> dict:
    data: dict = {"emq:{q}:completed": [(f"c{i}", start + i) for i in range(n)]}
    for i in range(n):
        data[f"emq:{{q}}:job:c{i}"] = {"state": "completed"}
    return data


def test_retention_deletes_the_oldest_rows_beyond_keep_completed() -> None:
    space = held(ACTIVE_ROW, **_finished(3), **{"emq:{q}:config": {"keep_completed": "2"}})
    assert run(complete, ["emq.complete", "q", "1", "1"], space) == "OK"
    assert [m for m, _ in members(space, b"completed")] == [b"c2", b"1"]
    assert row(space, "c0") is None and row(space, "c1") is None
    assert row(space, "c2") is not None
    # completed rows are not counted as trimmed
    assert hash_of(space, P + b"metrics:failed") is None
    check_invariant(space)


def test_keep_completed_zero_deletes_the_job_itself() -> None:
    space = held(ACTIVE_ROW, **{"emq:{q}:config": {"keep_completed": "0"}})
    assert run(complete, ["emq.complete", "q", "1", "1"], space) == "OK"
    assert row(space, "1") is None
    assert members(space, b"completed") == []
    assert hash_of(space, P + b"metrics:completed") == {b"count": b"1"}


def test_one_plan_trims_at_most_a_hundred() -> None:
    space = held(ACTIVE_ROW, **_finished(250), **{"emq:{q}:config": {"keep_completed": "10"}})
    result = drive(complete, ["emq.complete", "q", "1", "1"], space)
    dels = [op for op in result.ops if op[0] == b"DEL"]
    assert len(dels) == 1 and len(dels[0]) == 101
    assert dels[0][1:4] == (P + b"job:c0", P + b"job:c1", P + b"job:c2")  # oldest first
    space.apply(result.ops)
    assert len(members(space, b"completed")) == 151


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "1000")
    before = wire_snapshot(r)
    assert wire_error(r, "EMQ.COMPLETE", "q", job_id, b"0" + token) == "EMQSTALE token mismatch"
    assert wire_error(r, "EMQ.COMPLETE", "q", "9", "1") == "EMQSTALE job gone"
    assert wire_error(r, "EMQ.COMPLETE", "q", job_id, "1", "RESULT") == "syntax error"
    assert wire_snapshot(r) == before
    assert r.execute_command("EMQ.COMPLETE", "q", job_id, token, "RESULT", "done") == b"OK"
    assert r.hget("emq:{q}:job:1", "result") == b"done"
    assert r.hget("emq:{q}:metrics:completed", "count") == b"1"
    assert wire_error(r, "EMQ.COMPLETE", "q", job_id, token) == "EMQSTALE job not active"
    assert wire_error(r, "EMQ.COMPLETE", "q", job_id) == (
        "wrong number of arguments for 'emq.complete' command")


@pytest.mark.parametrize("result", [[], ["RESULT", "r"]])
@pytest.mark.parametrize(("finished", "keep"), [(0, 5), (4, 5), (5, 5), (9, 5), (0, 0), (3, 0)])
def test_a_flat_job_s_shape_makes_the_plan_of_the_general_trim(
        result: list, finished: int, keep: int) -> None:
    """COMPLETE's Shape path (a flat job, at most one row trimmed) against what the
    general path's finish_ops writes; beyond one row in excess the general path runs."""
    config = {"emq:{q}:config": {"keep_completed": str(keep)}}
    space = held(ACTIVE_ROW, **_finished(finished), **config)
    plan = drive(complete, ["emq.complete", "q", "1", "1", *result], space)
    keys = queue_keys(b"q")
    fields = [b"state", b"completed", b"finished_ms", b"%d" % NOW]
    fields += [b"result", b"r"] if result else []
    expected = [(b"ZREM", keys.active, b"1"), (b"HSET", keys.job(b"1"), *fields),
                *job.finish_ops(space, keys, job.COMPLETED, [b"1"], NOW, keep)]
    assert effects(plan) == effects(Plan(expected, "OK"))
    assert (plan.shape is not None) == (finished + 1 - keep <= 1)


@settings(max_examples=150, deadline=None, database=None)
@given(finished=st.integers(0, 12), keep=st.none() | st.integers(0, 12),
       result=st.none() | st.binary(max_size=24), attempts=st.integers(1, 2**20),
       completed=st.none() | st.integers(0, 2**40), now=st.integers(2, 2**50))
def test_a_flat_job_s_shape_plans_what_the_general_path_plans(
        finished: int, keep: int | None, result: bytes | None, attempts: int,
        completed: int | None, now: int) -> None:
    """COMPLETE of a flat job where a flat Shape answers (complete.SHAPES) against
    complete.general on the same keyspace: the same ops as the log holds them, reply,
    events and due; the completed set at any length around keep_completed, RESULT or
    not, the counter at any value (or absent)."""
    extra: dict[str, object] = {**_finished(finished)}
    if keep is not None:
        extra["emq:{q}:config"] = {"keep_completed": keep}
    if completed is not None:
        extra["emq:{q}:metrics:completed"] = {"count": completed}
    space = held({**ACTIVE_ROW, "attempts": attempts}, **extra)
    argv = [b"emq.complete", b"q", b"1", b"%d" % attempts]
    args = complete.parse(argv + ([] if result is None else [b"RESULT", result]), Config())
    fast = complete.plan(args, space, now, RUN_ID)
    assume(fast.shape in complete.SHAPES.values())  # beyond one row trimmed: general only
    row = space.hash(queue_keys(b"q").job(b"1"))
    assert row is not None
    general = complete.general(args, space, row,
                               queue_settings.of_queue(space, args.keys, args.config), now)
    assert effects(fast) == effects(general)
    assert (fast.events, fast.due) == (general.events, general.due)
