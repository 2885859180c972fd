"""Flows: EMQ.FLOW and EMQ.CHILDREN, and what every verb does to a child's parent
(emqd/rules/flows.py), driven through the planners; the wire at the end."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from emqd import errors
from emqd.commit.events import ADDED, DEAD, PROMOTED, REMOVED, REVIVED
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.reply import NULL_ARRAY
from emqd.rules import retention
from emqd.verbs import (
    add,
    children,
    claim,
    complete,
    fail,
    flow,
    log,
    remove,
    requeue,
    revive,
    stalled_check,
)
from tests.verbs.jobs import (
    check_flows,
    check_invariant,
    check_lanes,
    members,
    row,
    run,
    snapshot,
)
from tests.verbs.planner import NOW, KeysRead, drive, hash_of, keyspace, set_field

P = b"emq:{p}:"
C = b"emq:{c}:"


def check(space: Any) -> None:
    for prefix in (P, C):
        check_invariant(space, prefix)
        check_lanes(space, prefix=prefix)
    check_flows(space)


def take(space: Any, queue: str, now: int = NOW) -> list:
    """Claim one job of `queue`; [id, token, payload, failures]."""
    job = run(claim, ["emq.claim", queue, 1000], space, now=now)
    assert isinstance(job, list), job
    return job


def finish(space: Any, queue: str, result: str | None = None) -> bytes:
    job_id, token, _, _ = take(space, queue)
    extra = [] if result is None else ["RESULT", result]
    assert run(complete, ["emq.complete", queue, job_id, token, *extra], space) == "OK"
    return job_id


def kill(space: Any, queue: str) -> bytes:
    job_id, token, _, _ = take(space, queue)
    assert run(fail, ["emq.fail", queue, job_id, token, "ERROR", "boom", "MAXATTEMPTS", 1],
               space)[0] == b"dead"
    return job_id


def listing(space: Any, queue: str, job_id: str) -> Any:
    return drive(children, ["emq.children", queue, job_id], space)


# --- creating -------------------------------------------------------------------------
def test_a_flow_is_one_plan_a_waiting_parent_and_children_that_name_it() -> None:
    space = keyspace()
    result = drive(flow, ["emq.flow", "p", "report", "PRIORITY", "3", "CHILD", "c", "a",
                          "CHILD", "c", "b", "CHILD", "p", "local"], space)
    assert isinstance(result, Plan)
    assert result.reply == [b"1", [b"1", b"2", b"2"]]
    assert [event[0] for event in result.events or ()] == [ADDED] * 4
    space.apply(result.ops)
    assert row(space, "1", P) == {b"state": b"waiting", b"payload": b"report",
                                  b"created_ms": b"%d" % NOW, b"priority": b"3",
                                  b"children": b"3", b"children_left": b"3"}
    assert members(space, b"waiting", P) == [(b"1", NOW)]
    assert row(space, "1", C)[b"parent"] == P + b"job:1"
    assert row(space, "2", P)[b"parent"] == P + b"job:1"
    assert members(space, b"children:1", P) == [(C + b"job:1", 1), (C + b"job:2", 2),
                                                (P + b"job:2", 3)]
    assert hash_of(space, P + b"meta") == {b"seq": b"2", b"added": b"2"}
    assert hash_of(space, C + b"meta") == {b"seq": b"2", b"added": b"2"}
    assert {m for m, _ in members(space, b"queues", b"emq:")} == {b"p", b"c"}
    check(space)


def test_a_parent_runs_only_after_its_children_with_their_results() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "sum", "CHILD", "c", "one", "CHILD", "c", "two"], space)
    assert run(claim, ["emq.claim", "p", 1000], space) is NULL_ARRAY  # it waits
    finish(space, "c", "1")
    assert row(space, "1", P)[b"state"] == b"waiting"
    assert listing(space, "p", "1") == [[b"c", b"1", b"completed", b"1"],
                                        [b"c", b"2", b"pending", None]]
    last = drive(claim, ["emq.claim", "c", 1000], space)
    space.apply(last.ops)
    plan = drive(complete, ["emq.complete", "c", b"2", b"1", "RESULT", "2"], space)
    assert [event[0] for event in plan.events] == ["completed", PROMOTED]  # the same plan
    space.apply(plan.ops)
    assert row(space, "1", P)[b"state"] == b"pending"
    assert b"children_left" not in row(space, "1", P)
    check(space)
    job_id, token, payload, _ = take(space, "p")
    assert (job_id, payload) == (b"1", b"sum")
    assert listing(space, "p", "1") == [[b"c", b"1", b"completed", b"1"],
                                        [b"c", b"2", b"completed", b"2"]]
    assert run(complete, ["emq.complete", "p", job_id, token], space) == "OK"
    assert listing(space, "p", "1") == [[b"c", b"1", b"completed", b"1"],  # kept with its row
                                        [b"c", b"2", b"completed", b"2"]]
    check(space)


@pytest.mark.parametrize("keep", [0, 1])
def test_a_completed_parent_keeps_its_record_until_retention_deletes_its_row(keep: int) -> None:
    """Trimmed by its own COMPLETE (keep 0), or by the next one's fast path (keep 1), which
    leaves a victim with a record to the general trim: the record goes with the row."""
    space = keyspace(**{"emq:{p}:config": {"keep_completed": str(keep)}})
    run(flow, ["emq.flow", "p", "sum", "CHILD", "c", "one"], space)
    finish(space, "c", "1")
    job_id, token, _, _ = take(space, "p")
    run(complete, ["emq.complete", "p", job_id, token], space)
    if keep:
        assert listing(space, "p", "1") == [[b"c", b"1", b"completed", b"1"]]
        run(add, ["emq.add", "p", "plain"], space)
        finish(space, "p")
    assert row(space, "1", P) is None
    assert space.type_name(P + b"children:1") == space.type_name(P + b"results:1") == "none"
    check(space)


def test_results_outlive_the_childs_row() -> None:
    space = keyspace(**{"emq:{c}:config": {"keep_completed": "0"}})
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    finish(space, "c", "kept")
    assert row(space, "1", C) is None  # trimmed at once
    assert listing(space, "p", "1")[0] == [b"c", b"1", b"completed", b"kept"]
    check(space)


def test_a_tied_complete_writes_its_ties_before_the_trim_that_deletes_its_row() -> None:
    """ties.Ending's one order: the verb's own ops, the ties' (here the parent's record),
    then the ended job's entry into `completed` with its trim, which deletes the row
    at keep_completed 0: nothing writes the row after that."""
    space = keyspace(**{"emq:{c}:config": {"keep_completed": "0"}})
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    job_id, token, _, _ = take(space, "c")
    plan = drive(complete, ["emq.complete", "c", job_id, token, "RESULT", "r"], space)
    assert isinstance(plan, Plan)
    keys = [(op[0], op[1]) for op in plan.ops]
    child = C + b"job:" + job_id
    entry = keys.index((b"ZADD", C + b"completed"))
    assert keys.index((b"HSET", P + b"results:1")) < entry  # the parent's record: a tie
    assert max(i for i, (_, key) in enumerate(keys) if key == child) == \
        keys.index((b"DEL", child))  # the trim's DEL is the last op on the child's row
    assert keys.index((b"DEL", child)) > entry


def test_a_tree_runs_from_its_leaves_up() -> None:
    space = keyspace()
    reply = run(flow, ["emq.flow", "p", "root", "CHILD", "c", "middle", "CHILD", "c", "leaf",
                       "UNDER", "1", "CHILD", "p", "side"], space)
    assert reply == [b"1", [b"1", b"2", b"2"]]
    assert row(space, "1", C)[b"state"] == b"waiting"  # the middle job has a child
    assert row(space, "2", C)[b"parent"] == C + b"job:1"
    check(space)
    assert finish(space, "c") == b"2"  # the leaf: the middle job is pending now
    assert finish(space, "c") == b"1"
    assert row(space, "1", P)[b"state"] == b"waiting"  # "side" is still to run
    assert finish(space, "p") == b"2"
    assert finish(space, "p") == b"1"
    check(space)


def test_an_existing_parent_id_makes_the_flow_idempotent() -> None:
    space = keyspace()
    argv = ["emq.flow", "p", "x", "ID", "f1", "CHILD", "c", "a", "CHILD", "c", "b", "UNDER", "1"]
    first = run(flow, argv, space)
    before = snapshot(space)
    again = drive(flow, argv, space)
    assert isinstance(again, Plan) and again.ops == [] and again.reply == first
    assert snapshot(space) == before


@pytest.mark.parametrize("argv", [
    ["emq.flow", "p", "parent", "CHILD", "p", "c1", "CHILD", "p", "c2", "ID", "2"],
    ["emq.flow", "p", "parent", "CHILD", "p", "c", "ID", "1"],
])
def test_an_explicit_id_is_never_given_to_an_earlier_job_of_the_flow(argv: list) -> None:
    # The sequence gave the parent (or c1) the id a later child names: that job was
    # written over, and the parent waited for ever or sat in two sets.
    space = keyspace()
    parent, children = run(flow, argv, space)
    ids = [parent, *children]
    assert len(set(ids)) == len(ids)
    for job_id in children:
        assert row(space, job_id, P)[b"state"] == b"pending"  # type: ignore[index]
    check(space)
    for _ in children:
        finish(space, "p")
    assert take(space, "p")[0] == parent  # the parent runs once its children are done
    check(space)


def test_a_childs_existing_id_is_refused() -> None:
    space = keyspace(**{"emq:{c}:job:x": {"state": "completed"}})
    before = snapshot(space)
    result = drive(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "ID", "x"], space)
    assert result == errors.job_exists(b"c", b"x")
    assert snapshot(space) == before


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["p", "x"], errors.SYNTAX),  # no child (arity allows it through parse here)
        (["p", "x", "CHILD", "c"], errors.SYNTAX),
        (["p", "x", "UNDER", "0", "CHILD", "c", "a"], errors.SYNTAX),
        (["p", "x", "CHILD", "c", "a", "UNIQUE", "k"], errors.SYNTAX),
        (["p", "x", "CHILD", "c", "a", "PRIORITY", "1", "PRIORITY", "2"], errors.SYNTAX),
        (["p", "x", "ONCHILDFAIL", "explode", "CHILD", "c", "a"], errors.INVALID_CHILD_POLICY),
        (["p", "x", "CHILD", "c", "a", "UNDER", "1"], errors.FLOW_UNDER),
        (["p", "x", "CHILD", "c", "a", "UNDER", "-1"], errors.must_be_non_negative("UNDER")),
        (["p", "x", "DELAY", "10", "CHILD", "c", "a"], errors.FLOW_PARENT_DELAY),
        (["p", "x", "CHILD", "c", "a", "ONCHILDFAIL", "ignore"],
         errors.FLOW_POLICY_WITHOUT_CHILDREN),
        (["p", "x", "ID", "a", "CHILD", "p", "y", "ID", "a"], errors.FLOW_SAME_ID),
        (["p", "x", "CHILD", "c{", "a"], errors.INVALID_QUEUE),
        (["p", "x", "CHILD", "c", "a", "PRIORITY", "5000"], errors.PRIORITY_RANGE),
    ],
)
def test_refusals_write_nothing(argv: list, error: Any) -> None:
    space = keyspace(**{"emq:{p}:meta": {"seq": "4"}})
    before = snapshot(space)
    assert drive(flow, ["emq.flow", *argv], space) == error
    assert snapshot(space) == before


def test_a_payload_named_child_is_a_payload() -> None:
    space = keyspace()
    assert run(flow, ["emq.flow", "p", "CHILD", "CHILD", "c", "CHILD"], space) == [b"1", [b"1"]]
    assert row(space, "1", P)[b"payload"] == b"CHILD"
    assert row(space, "1", C)[b"payload"] == b"CHILD"


# --- a child that dies ---------------------------------------------------------------------
def test_a_dead_child_fails_its_parent_and_reviving_it_unfails_the_parent() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    job_id, token, _, _ = take(space, "c")
    plan = drive(fail, ["emq.fail", "c", job_id, token, "MAXATTEMPTS", 1], space)
    assert [(e[0], e[1], e[2]) for e in plan.events] == [(DEAD, b"c", b"1"), (DEAD, b"p", b"1")]
    space.apply(plan.ops)
    parent = row(space, "1", P)
    assert parent[b"state"] == b"dead"
    assert parent[b"last_error"] == b"child died: emq:{c}:job:1"
    assert parent[b"failed_child"] == C + b"job:1"
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"1"}
    check(space)
    before = snapshot(space)
    assert drive(revive, ["emq.revive", "p", "1"], space) == errors.STATE_DEAD_OF_CHILD
    assert snapshot(space) == before
    plan = drive(revive, ["emq.revive", "c", "1"], space)
    assert [(e[0], e[1]) for e in plan.events] == [(REVIVED, b"c"), (REVIVED, b"p")]
    space.apply(plan.ops)
    assert row(space, "1", P)[b"state"] == b"waiting"
    assert b"failed_child" not in row(space, "1", P)
    check(space)
    finish(space, "c")
    finish(space, "c")
    assert row(space, "1", P)[b"state"] == b"pending"
    check(space)


def test_two_dead_children_a_parent_lives_again_only_when_both_are_revived() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    kill(space, "c")
    kill(space, "c")
    assert row(space, "1", P)[b"children_dead"] == b"2"
    run(revive, ["emq.revive", "c", "2"], space)
    assert row(space, "1", P)[b"state"] == b"dead"
    run(revive, ["emq.revive", "c", "1"], space)
    assert row(space, "1", P)[b"state"] == b"waiting"
    check(space)


def test_removing_the_dead_child_lets_the_parent_go_on_without_it() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    finish(space, "c")
    kill(space, "c")
    assert row(space, "1", P)[b"state"] == b"dead"
    plan = drive(remove, ["emq.remove", "c", "2"], space)
    assert [e[0] for e in plan.events] == [REMOVED, REVIVED, PROMOTED]
    space.apply(plan.ops)
    assert row(space, "1", P)[b"state"] == b"pending"
    assert listing(space, "p", "1")[1] == [b"c", b"2", b"removed", None]
    check(space)


def test_ignore_lets_the_parent_go_on_when_the_rest_are_done() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "ONCHILDFAIL", "ignore", "CHILD", "c", "a",
               "CHILD", "c", "b"], space)
    kill(space, "c")
    assert row(space, "1", P)[b"state"] == b"waiting"
    assert row(space, "1", P)[b"children_left"] == b"1"
    run(revive, ["emq.revive", "c", "1"], space)  # it counts again
    assert row(space, "1", P)[b"children_left"] == b"2"
    kill(space, "c")
    kill(space, "c")
    assert row(space, "1", P)[b"state"] == b"pending"
    check(space)
    run(revive, ["emq.revive", "c", "1"], space)  # the parent has gone on: nothing to it
    assert row(space, "1", P)[b"state"] == b"pending"
    check(space)


def test_remove_deletes_the_rest_but_not_what_runs() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "ONCHILDFAIL", "remove", "CHILD", "c", "a",
               "CHILD", "c", "b", "CHILD", "c", "c", "CHILD", "p", "d", "DELAY", "500",
               "CHILD", "p", "e", "UNDER", "3", "CHILD", "p", "f", "UNDER", "5"], space)
    running = take(space, "c")  # "a", active
    job_id, token, _, _ = take(space, "c")  # "b"
    plan = drive(fail, ["emq.fail", "c", job_id, token, "MAXATTEMPTS", 1], space)
    space.apply(plan.ops)
    assert row(space, "1", P)[b"state"] == b"dead"
    assert row(space, "3", C) is None  # "c", pending: removed, with its subtree ...
    assert row(space, "1", P) is not None and row(space, "2", P) is None  # "d", scheduled
    assert row(space, "3", P) is None and row(space, "4", P) is None  # "e" and "f"
    assert space.type_name(C + b"children:3") == "none"
    assert row(space, "1", C)[b"state"] == b"active"  # "a" runs on ...
    assert run(complete, ["emq.complete", "c", running[0], running[1]], space) == "OK"
    assert row(space, "1", P)[b"state"] == b"dead"
    assert row(space, "1", P)[b"children_left"] == b"1"  # only "b", dead, is left
    check(space)


def test_a_child_removed_by_the_policy_takes_its_log_with_it() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "ONCHILDFAIL", "remove", "CHILD", "c", "a",
               "CHILD", "c", "b"], space)
    job_id, token, _, _ = take(space, "c")  # "a": it logs a line, then goes back to pending
    other, other_token, _, _ = take(space, "c")  # "b"
    assert run(log, ["emq.log", "c", job_id, token, "fetched"], space) == 1
    assert run(requeue, ["emq.requeue", "c", job_id, token], space) == "OK"
    assert space.type_name(C + b"log:1") == "zset"
    assert run(fail, ["emq.fail", "c", other, other_token, "MAXATTEMPTS", 1], space)[0] == b"dead"
    # "b" died: the parent dies, and "a" (pending again) is removed with its log
    assert row(space, "1", P)[b"state"] == b"dead"
    assert row(space, "1", C) is None and space.type_name(C + b"log:1") == "none"
    check(space)


def test_remove_does_not_delete_a_middle_job_that_dies_in_the_same_plan() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "root", "ONCHILDFAIL", "remove", "CHILD", "c", "middle",
               "CHILD", "c", "leaf", "UNDER", "1"], space)
    kill(space, "c")  # the leaf: the middle job dies, the root dies of it
    assert row(space, "1", C)[b"state"] == b"dead"
    assert row(space, "1", P)[b"state"] == b"dead"
    assert row(space, "1", P)[b"failed_child"] == C + b"job:1"
    check(space)
    run(revive, ["emq.revive", "c", "2"], space)  # the leaf: both come back
    assert row(space, "1", C)[b"state"] == b"waiting"
    assert row(space, "1", P)[b"state"] == b"waiting"
    check(space)


def test_the_sweep_and_claim_kill_children_too() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "MAXATTEMPTS", "1", "CHILD", "c", "b"],
        space)
    take(space, "c")
    run(stalled_check, ["emq.stalled.check", "c", "MAXSTALLED", 1], space, now=NOW + 5000)
    assert row(space, "1", P)[b"state"] == b"dead"
    check(space)
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a", "CHILD", "c", "b"], space)
    set_field(space, C + b"job:1", b"attempts", b"01")  # CLAIM dead-letters it
    assert take(space, "c")[0] == b"2"
    assert row(space, "1", C)[b"state"] == b"dead"
    assert row(space, "1", P)[b"state"] == b"dead"
    check(space)


def test_a_child_in_the_same_queue_dies_with_its_parent_in_one_trim() -> None:
    space = keyspace(**{"emq:{p}:config": {"keep_dead": "1"}})
    run(flow, ["emq.flow", "p", "x", "CHILD", "p", "a", "CHILD", "p", "b"], space)
    kill(space, "p")
    # Both died at the same time: the trim takes the lower id first (ZPOPMIN order), the
    # parent, with its record.
    assert [m for m, _ in members(space, b"dead", P)] == [b"2"]
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"2", b"trimmed": b"1"}
    assert space.type_name(P + b"children:1") == "none"
    check_invariant(space, P)


def test_a_dead_parent_trimmed_takes_its_record_with_it() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a"], space)
    kill(space, "c")
    assert space.type_name(P + b"children:1") == "zset"
    set_field(space, P + b"config", b"keep_dead", b"0")
    space.apply(retention.plan(retention.slice_args(b"p", Config()), space, NOW, b"").ops)
    assert row(space, "1", P) is None
    assert space.type_name(P + b"children:1") == "none"


def test_a_lane_parent_enters_its_lane() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "GROUP", "acme", "CHILD", "c", "a", "GROUP", "beta"], space)
    check(space)
    finish(space, "c")
    assert members(space, b"lane:acme", P) == [(b"1", 2)]
    check(space)


def test_a_corrupt_parent_counter_refuses_the_childs_complete() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "p", "x", "CHILD", "c", "a"], space)
    job_id, token, _, _ = take(space, "c")
    set_field(space, P + b"job:1", b"children_left", b"many")
    before = snapshot(space)
    assert drive(complete, ["emq.complete", "c", job_id, token], space) == errors.HASH_NOT_INTEGER
    assert snapshot(space) == before
    set_field(space, P + b"job:1", b"children_left", b"1")
    set_field(space, P + b"job:1", b"on_child_fail", b"shrug")
    assert drive(complete, ["emq.complete", "c", job_id, token], space) == \
        errors.corrupt_job_field(b"on_child_fail")


def test_a_job_without_ties_reads_nothing_of_flows() -> None:
    space = keyspace()
    run(add, ["emq.add", "p", "x"], space)
    job_id, token, _, _ = take(space, "p")
    view = KeysRead(space)
    complete.plan(complete.parse([b"emq.complete", b"p", job_id, token], Config()), view, NOW,
                  b"")
    read = set(view.keys)
    assert not any(b"children" in key or b"results" in key or b"unique" in key for key in read)


def test_over_the_wire(r: redis.Redis) -> None:
    parent, kids = r.execute_command("EMQ.FLOW", "render", "page", "CHILD", "fetch", "a",
                                     "CHILD", "fetch", "b")
    assert (parent, kids) == (b"1", [b"1", b"2"])
    assert r.execute_command("EMQ.CLAIM", "render", 1000) is None
    for _ in kids:
        job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "fetch", 1000)
        r.execute_command("EMQ.COMPLETE", "fetch", job_id, token, "RESULT", b"got " + job_id)
    assert r.execute_command("EMQ.CHILDREN", "render", parent) == [
        [b"fetch", b"1", b"completed", b"got 1"], [b"fetch", b"2", b"completed", b"got 2"]]
    assert r.execute_command("EMQ.CLAIM", "render", 1000)[:3] == [b"1", b"1", b"page"]
    assert r.execute_command("EMQ.CHILDREN", "render", "nope") is None
    assert r.execute_command("EMQ.STATS", "render")[b"waiting"] == 0


def test_wait_and_the_events_follow_a_parent_over_the_wire(r: redis.Redis) -> None:
    """EMQ.WAIT on a parent answers when its child's death kills it; the parent's queue's
    channel tells of its promotion and its death, made by the child's verbs."""
    events = r.pubsub()
    events.subscribe("emq:{render}:events")
    assert events.get_message(timeout=5)["type"] == "subscribe"
    parent, _ = r.execute_command("EMQ.FLOW", "render", "page", "CHILD", "fetch", "a",
                                  "MAXATTEMPTS", 1)
    assert r.execute_command("EMQ.WAIT", "render", parent, 10) is None  # waiting: not done
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "fetch", 1000)
    assert r.execute_command("EMQ.FAIL", "fetch", job_id, token)[0] == b"dead"
    assert r.execute_command("EMQ.WAIT", "render", parent, 1000) == [
        b"dead", b"child died: emq:{fetch}:job:" + job_id]
    assert r.execute_command("EMQ.REVIVE", "fetch", job_id) == b"OK"
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "fetch", 1000)
    r.execute_command("EMQ.COMPLETE", "fetch", job_id, token)
    heard = []
    for _ in range(10):
        message = events.get_message(timeout=5)
        if message is None:
            break
        heard.append(json.loads(message["data"])["event"])
        if heard[-1] == "promoted":
            break
    events.close()
    assert heard == ["added", "dead", "revived", "promoted"], heard
