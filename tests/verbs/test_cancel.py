"""EMQ.CANCEL (emqd/verbs/cancel.py): a job ends `cancelled` from any live state, for good;
its holder is told EMQCANCELLED at its next call; flows, unique keys, lanes and retention
follow; over the wire."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.rules import retention
from emqd.verbs import (
    add,
    cancel,
    children,
    claim,
    complete,
    extend,
    fail,
    flow,
    log,
    progress,
    remove,
    requeue,
    revive,
    stalled_check,
    wait,
)
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_flows,
    check_invariant,
    check_lanes,
    check_unique,
    claim_one,
    members,
    row,
    run,
    snapshot,
    wire_error,
)
from tests.verbs.planner import NOW, RUN_ID, drive, effects, hash_of, keyspace, set_field


def cancelled(space: Any, job_id: str = "1", *reason: str) -> Any:
    return run(cancel, ["emq.cancel", "q", job_id, *(["REASON", *reason] if reason else [])],
               space)


def test_a_pending_job_ends_cancelled_in_one_plan() -> None:
    space = keyspace()
    add_jobs(space, 2)
    plan = drive(cancel, ["emq.cancel", "q", "1", "REASON", "not needed"], space)
    assert effects(plan) == effects(Plan([
        (b"ZREM", P + b"pending", b"1"),
        (b"HSET", P + b"job:1", b"cancel_reason", b"not needed", b"state", b"cancelled",
         b"finished_ms", b"%d" % NOW),
        (b"ZADD", P + b"cancelled", NOW, b"1"),
        (b"HSET", P + b"metrics", b"cancelled", b"1"),
    ], b"pending"))
    assert plan.events == [("cancelled", b"q", b"1", NOW, {"reason": b"not needed"})]
    space.apply(plan.ops)
    assert claim_one(space)[0] == b"2"  # job 1 never runs
    check_invariant(space)


@pytest.mark.parametrize("state", ["scheduled", "lane"])
def test_a_scheduled_or_lane_job_leaves_its_set(state: str) -> None:
    space = keyspace()
    add_jobs(space, 1, *(["DELAY", 1000] if state == "scheduled" else ["GROUP", "g"]))
    assert cancelled(space) == (b"scheduled" if state == "scheduled" else b"pending")
    assert row(space, "1")[b"state"] == b"cancelled"
    assert members(space, b"cancelled") == [(b"1", NOW)]
    check_invariant(space)
    check_lanes(space)


def test_an_active_job_ends_at_once_and_its_holder_is_told_at_its_next_call() -> None:
    space = keyspace()
    add_jobs(space, 1)
    job_id, token, _, _ = claim_one(space)
    assert cancelled(space, "1", "user gave up") == b"active"
    assert members(space, b"active") == [] and row(space, "1")[b"state"] == b"cancelled"
    told = errors.ReplyError(b"EMQCANCELLED job was cancelled: user gave up")
    before = snapshot(space)
    for verb, argv in [(extend, ["emq.extend", "q", "1", token, 1000]),
                       (progress, ["emq.progress", "q", "1", token, "50"]),
                       (log, ["emq.log", "q", "1", token, "a line"]),
                       (complete, ["emq.complete", "q", "1", token, "RESULT", "r"]),
                       (fail, ["emq.fail", "q", "1", token]),
                       (requeue, ["emq.requeue", "q", "1", token, "DELAY", 10])]:
        assert drive(verb, argv, space) == told, verb.__name__
    assert snapshot(space) == before  # every refusal writes nothing
    assert drive(extend, ["emq.extend", "q", "1", "2", 1000], space) == errors.STALE_TOKEN
    check_invariant(space)


def test_without_a_reason_the_holder_is_told_the_bare_code() -> None:
    space = keyspace()
    add_jobs(space, 1)
    _, token, _, _ = claim_one(space)
    cancelled(space)
    assert drive(extend, ["emq.extend", "q", "1", token, 1000], space) == errors.CANCELLED
    assert b"cancel_reason" not in row(space, "1")


def test_the_sweep_never_brings_a_cancelled_job_back() -> None:
    space = keyspace()
    add_jobs(space, 1)
    claim_one(space, lease=10)
    cancelled(space)
    reply = run(stalled_check, ["emq.stalled.check", "q"], space, now=NOW + 1000)
    assert reply == [[], []]
    assert run(claim, ["emq.claim", "q", 1000], space, now=NOW + 1000) is not None  # nil
    assert row(space, "1")[b"state"] == b"cancelled"


def test_nothing_revives_it_and_a_new_job_under_its_id_has_new_tokens() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "x", "ID", "job"], space)
    _, token, _, _ = claim_one(space)
    cancelled(space, "job")
    assert drive(revive, ["emq.revive", "q", "job"], space) == errors.STATE_NOT_DEAD
    assert run(remove, ["emq.remove", "q", "job"], space) == 1  # a finished row: removable
    run(add, ["emq.add", "q", "again", "ID", "job"], space)
    _, new_token, _, _ = claim_one(space)
    assert int(new_token) > int(token)
    assert drive(complete, ["emq.complete", "q", "job", token], space) == errors.STALE_TOKEN


@pytest.mark.parametrize(("end", "state"), [("complete", b"completed"), ("dead", b"dead"),
                                            ("cancel", b"cancelled")])
def test_a_finished_job_is_refused_and_nothing_written(end: str, state: bytes) -> None:
    space = keyspace()
    add_jobs(space, 1)
    if end == "cancel":
        cancelled(space)
    else:
        job_id, token, _, _ = claim_one(space)
        extra = [] if end == "complete" else ["MAXATTEMPTS", 1]
        run(complete if end == "complete" else fail,
            [f"emq.{'complete' if end == 'complete' else 'fail'}", "q", job_id, token, *extra],
            space)
    before = snapshot(space)
    assert drive(cancel, ["emq.cancel", "q", "1"], space) == errors.state_is(state)
    assert snapshot(space) == before


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({"emq:{q}:job:1": {"state": "pending"}}, ["REASON", "x" * 4097],
         errors.too_long("REASON", 4096)),
        ({"emq:{q}:job:1": {"state": "pending"}}, ["REASON"], errors.SYNTAX),
        ({"emq:{q}:job:1": {"state": "pending"}}, ["WHY", "x"], errors.SYNTAX),
        ({"emq:{q}:job:1": {"state": "lost"}}, [], errors.corrupt_job_field(b"state")),
        ({"emq:{q}:job:1": [("x", 1)]}, [], errors.WRONGTYPE),
        ({"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:pending": [("1", 1)],
          "emq:{q}:cancelled": {"a": "b"}}, [], errors.WRONGTYPE),
        ({"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:pending": [("1", 1)],
          "emq:{q}:metrics": {"cancelled": "x"}}, [], errors.HASH_NOT_INTEGER),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(cancel, ["emq.cancel", "q", "1", *argv], space) == error
    assert snapshot(space) == before


def test_no_such_job_is_nil_and_writes_nothing() -> None:
    assert effects(drive(cancel, ["emq.cancel", "q", "9"], keyspace())) == effects(
        Plan([], None))


def test_a_lane_job_cancelled_while_active_gives_its_slot_back() -> None:
    space = keyspace()
    add_jobs(space, 2, "GROUP", "g")
    claim_one(space)
    assert run(claim, ["emq.claim", "q", 1000], space) is not None
    cancelled(space)
    assert claim_one(space)[0] == b"2"
    check_invariant(space)
    check_lanes(space)


def test_wait_answers_cancelled_with_the_reason() -> None:
    space = keyspace()
    add_jobs(space, 2)
    cancelled(space, "1", "dup")
    cancelled(space, "2")
    assert drive(wait, ["emq.wait", "q", "1", 0], space) == [b"cancelled", b"dup"]
    assert drive(wait, ["emq.wait", "q", "2", 0], space) == [b"cancelled", None]


def test_a_unique_key_is_free_once_its_job_is_cancelled() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "x", "UNIQUE", "k"], space)
    cancelled(space)
    assert run(add, ["emq.add", "q", "y", "UNIQUE", "k"], space) == [b"2", b"added"]
    check_unique(space, NOW)


def test_retention_keeps_cancelled_jobs_by_the_completed_settings() -> None:
    space = keyspace(**{"emq:{q}:config": {"keep_completed": "2"}})
    add_jobs(space, 4)
    for job_id in ("1", "2", "3"):
        cancelled(space, job_id)
    assert [m for m, _ in members(space, b"cancelled")] == [b"2", b"3"]  # the oldest went
    assert row(space, "1") is None
    set_field(space, P + b"config", b"keep_completed", b"1")
    space.apply(retention.plan(retention.slice_args(b"q", Config()), space, NOW, b"").ops)
    assert [m for m, _ in members(space, b"cancelled")] == [b"3"]
    set_field(space, P + b"config", b"keep_completed_ms", b"1000")
    assert retention.next_aging(space, retention.slice_args(b"q", Config()).keys,
                                Config()) == NOW + 1000
    check_invariant(space)


# --- flows: a cancelled child is what its parent's ONCHILDFAIL rule says ----------------
def test_a_cancelled_child_fails_its_parent_by_default() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "parent", "CHILD", "q", "a", "CHILD", "q", "b"], space)
    assert cancelled(space, "1") == b"pending"
    parent = hash_of(space, b"emq:{p}:job:1")
    assert parent[b"state"] == b"dead"
    assert parent[b"last_error"] == b"child cancelled: emq:{q}:job:1"
    assert drive(revive, ["emq.revive", "p", "1"], space) == errors.STATE_DEAD_OF_CHILD
    assert run(remove, ["emq.remove", "q", "1"], space) == 1  # go on without it
    assert hash_of(space, b"emq:{p}:job:1")[b"state"] == b"waiting"
    check_flows(space)


def test_ignore_settles_a_cancelled_child_and_remove_takes_the_rest() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "parent", "ONCHILDFAIL", "ignore", "CHILD", "q", "a"], space)
    cancelled(space, "1")
    assert hash_of(space, b"emq:{p}:job:1")[b"state"] == b"pending"  # nothing left: it runs
    other = keyspace()
    run(flow, ["emq.flow", "p", "parent", "ONCHILDFAIL", "remove", "CHILD", "q", "a",
               "CHILD", "q", "b"], other)
    cancelled(other, "1")
    assert hash_of(other, b"emq:{p}:job:1")[b"state"] == b"dead"
    assert row(other, "2") is None  # its pending sibling removed
    check_flows(space)
    check_flows(other)


def test_a_cancelled_parent_keeps_its_record_and_its_children_go_on() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "q", "parent", "CHILD", "q", "a"], space)
    assert cancelled(space, "1") == b"waiting"
    parent = row(space, "1")
    assert parent[b"state"] == b"cancelled" and b"children_left" not in parent
    job_id, token, _, _ = claim_one(space)
    assert job_id == b"2" and run(complete, ["emq.complete", "q", job_id, token], space) == "OK"
    assert row(space, "1")[b"state"] == b"cancelled"  # the child's end settles nothing
    listed = drive(children, ["emq.children", "q", "1"], space)
    assert listed == [[b"q", b"2", b"completed", b""]]
    check_invariant(space)
    check_flows(space)


# --- over the wire -----------------------------------------------------------------------
def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.ADD", "q", "b", "DELAY", 60_000)
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 30_000)
    assert r.execute_command("EMQ.CANCEL", "q", job_id, "REASON", "stop it") == b"active"
    assert wire_error(r, "EMQ.EXTEND", "q", job_id, token, 30_000) == \
        "EMQCANCELLED job was cancelled: stop it"
    assert wire_error(r, "EMQ.COMPLETE", "q", job_id, token) == \
        "EMQCANCELLED job was cancelled: stop it"
    assert r.execute_command("EMQ.CANCEL", "q", "2") == b"scheduled"
    assert r.execute_command("EMQ.CANCEL", "q", "9") is None
    assert wire_error(r, "EMQ.CANCEL", "q", "2") == "EMQSTATE job is cancelled"
    stats = r.execute_command("EMQ.STATS", "q")
    assert list(stats)[-2:] == [b"cancelled", b"cancelled_total"]
    assert (stats[b"cancelled"], stats[b"cancelled_total"], stats[b"active"]) == (2, 2, 0)
    assert r.execute_command("EMQ.WAIT", "q", "1", 0) == [b"cancelled", b"stop it"]


def test_a_parked_wait_is_answered_by_the_cancel(r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    answers: list[Any] = []
    with redis.Redis(port=emqd_port) as other:
        waiter = threading.Thread(
            target=lambda: answers.append(other.execute_command("EMQ.WAIT", "q", "1", 5000)))
        waiter.start()
        for _ in range(200):  # bounded: until the WAIT is parked
            if r.info("clients")["blocked_clients"]:
                break
            threading.Event().wait(0.01)
        r.execute_command("EMQ.CANCEL", "q", "1")
        waiter.join(timeout=10)
    assert answers == [[b"cancelled", None]]


def test_run_id_does_not_matter_to_the_guard() -> None:
    """A lease from an earlier process (another epoch) is told the same."""
    space = keyspace()
    add_jobs(space, 1)
    _, token, _, _ = claim_one(space, run_id=b"b" * 40)
    cancelled(space)
    assert drive(extend, ["emq.extend", "q", "1", token, 10], space,
                 run_id=RUN_ID) == errors.CANCELLED
