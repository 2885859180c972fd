"""Lanes (protocol section 8), through the planners: entry, round-robin, limits, slots back."""

from __future__ import annotations

from typing import Any

import pytest

from emqd import core_build, errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.reply import NULL_ARRAY
from emqd.verbs import (
    add,
    claim,
    complete,
    fail,
    lane_limit,
    lane_list,
    promote,
    remove,
    requeue,
    revive,
    stalled_check,
    stats,
)
from emqd.verbs import (
    queue_config as config,
)
from tests.verbs.jobs import (
    P,
    check_invariant,
    check_lanes,
    members,
    row,
    run,
    snapshot,
)
from tests.verbs.planner import (
    NOW,
    OTHER_RUN_ID,
    RUN_ID,
    RecordingView,
    drive,
    effects,
    hash_of,
    keyspace,
    set_field,
)


def add_to(space: Any, group: str | None, n: int = 1, *options: Any) -> list[bytes]:
    extra = ["GROUP", group] if group is not None else []
    return [run(add, ["emq.add", "q", f"{group}{i}", *extra, *options], space) for i in range(n)]


def claim_ids(space: Any, count: int | None = None) -> list[bytes]:
    argv: list = ["emq.claim", "q", 1000] + (["COUNT", count] if count else [])
    reply = run(claim, argv, space)
    if count is None:
        return [] if reply is NULL_ARRAY else [reply[0]]
    return [job[0] for job in reply]


def group_of(space: Any, job_id: bytes) -> bytes | None:
    return row(space, job_id).get(b"group")


def finish(space: Any, job_id: bytes) -> None:
    token = row(space, job_id)[b"attempts"]
    assert run(complete, ["emq.complete", "q", job_id, token], space) == "OK"


def checked(space: Any, default_limit: int = 1) -> None:
    check_invariant(space)
    check_lanes(space, default_limit)


def limit_all(space: Any, n: int) -> None:
    assert run(config, ["emq.config", "q", "SET", "lane_limit", n], space) == "OK"


# --- ADD ------------------------------------------------------------------------------
def test_add_with_group_enters_its_lane_and_the_ring() -> None:
    space = keyspace()
    assert add_to(space, "g", 2) == [b"1", b"2"]
    assert row(space, "1")[b"group"] == b"g"
    assert row(space, "1")[b"state"] == b"pending"
    assert members(space, b"lane:g") == [(b"1", 1), (b"2", 2)]
    assert members(space, b"pending") == []
    assert members(space, b"ring") == [(b"g", 1)]
    assert hash_of(space, P + b"meta")[b"lanes_pending"] == b"2"
    checked(space)


def test_add_with_group_and_priority_scores_like_pending() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "x", "GROUP", "g", "PRIORITY", "-2"], space)
    assert members(space, b"lane:g") == [(b"1", -2 * 2**40 + 1)]


def test_delayed_add_with_group_waits_in_scheduled() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "x", "GROUP", "g", "DELAY", "50"], space)
    assert members(space, b"scheduled") == [(b"1", NOW + 50)]
    assert row(space, "1")[b"group"] == b"g"
    assert space.zset(P + b"ring") is None
    checked(space)


def test_flat_add_without_lanes_writes_no_lane_key() -> None:
    space = keyspace()
    result = drive(add, ["emq.add", "q", "x"], space)
    assert [op[0:2] for op in result.ops] == [
        (b"HSET", P + b"job:1"), (b"ZADD", P + b"pending"), (b"HSET", P + b"meta"),
        (b"ZADD", b"emq:queues")]


def test_flat_add_joins_an_existing_ring() -> None:
    space = keyspace()
    add_to(space, "g")
    add_to(space, None)
    assert members(space, b"ring") == [(b"g", 1), (b"", 2)]
    checked(space)


# --- CLAIM: round-robin ----------------------------------------------------------------
def test_claim_goes_round_the_ring_job_by_job() -> None:
    space = keyspace()
    limit_all(space, 0)
    add_to(space, "a", 3)
    add_to(space, "b", 2)
    add_to(space, None, 2)
    got = [group_of(space, j) for j in claim_ids(space, 10)]
    assert got == [b"a", b"b", None, b"a", b"b", None, b"a"]
    assert space.zset(P + b"ring") is None
    assert hash_of(space, P + b"gactive") == {b"a": b"3", b"b": b"2"}
    checked(space, 0)


def test_fairness_a_big_lane_does_not_starve_a_small_one() -> None:
    # The case: A gets 10,000 jobs, then B 10; no limit, so one CLAIM COUNT 20
    # goes round the ring: B's jobs are interleaved with A's, all ten of them.
    space = keyspace()
    limit_all(space, 0)
    add_to(space, "A", 10_000)
    add_to(space, "B", 10)
    got = [group_of(space, j) for j in claim_ids(space, 20)]
    assert got == [b"A", b"B"] * 10
    checked(space, 0)


def test_fairness_with_limit_one_b_comes_every_other_claim() -> None:
    space = keyspace()
    add_to(space, "A", 10_000)
    add_to(space, "B", 10)
    got = []
    for _ in range(20):
        (job_id,) = claim_ids(space)
        got.append(group_of(space, job_id))
        finish(space, job_id)
    assert got == [b"A", b"B"] * 10
    checked(space)


def test_limit_one_never_claims_two_of_a_lane() -> None:
    space = keyspace()
    add_to(space, "a", 3)
    add_to(space, "b", 3)
    assert [group_of(space, j) for j in claim_ids(space, 10)] == [b"a", b"b"]
    assert claim_ids(space, 10) == []
    assert space.zset(P + b"ring") is None
    checked(space)


def test_a_lane_limit_of_two() -> None:
    space = keyspace()
    add_to(space, "a", 5)
    assert run(lane_limit, ["emq.lane.limit", "q", "a", "2"], space) == "OK"
    assert len(claim_ids(space, 5)) == 2
    checked(space)


def test_order_within_a_lane_is_priority_then_add_order() -> None:
    space = keyspace()
    limit_all(space, 0)
    for payload, prio in (("x", 0), ("y", 5), ("z", -1), ("w", 0)):
        run(add, ["emq.add", "q", payload, "GROUP", "g", "PRIORITY", prio], space)
    reply = run(claim, ["emq.claim", "q", 1000, "COUNT", 4], space)
    assert [job[2] for job in reply] == [b"z", b"x", b"w", b"y"]


def test_flat_jobs_are_served_directly_when_no_lane_is_servable() -> None:
    space = keyspace()
    add_to(space, "g", 2)
    add_to(space, None, 2)
    assert [group_of(space, j) for j in claim_ids(space, 3)] == [b"g", None, None]
    assert space.zset(P + b"ring") is None  # g is full: no lane servable, no ring
    checked(space)


def test_lane_jobs_ghosts_and_corrupt_rows_are_skipped() -> None:
    space = keyspace()
    add_to(space, "g", 3)
    del space.data[P + b"job:1"]
    set_field(space, P + b"job:2", b"attempts", b"01")
    assert claim_ids(space) == [b"3"]
    assert row(space, "2")[b"state"] == b"dead"
    assert members(space, b"lane:g") == []
    checked(space)


def test_a_lane_of_ghosts_only_leaves_the_ring() -> None:
    space = keyspace()
    add_to(space, "g", 2)
    add_to(space, None)
    for job_id in (b"1", b"2"):
        del space.data[P + b"job:" + job_id]
    assert claim_ids(space, 5) == [b"3"]
    assert space.zset(P + b"ring") is None
    assert hash_of(space, P + b"meta")[b"lanes_pending"] == b"0"


@pytest.mark.skipif(core_build() == "mypyc", reason="counts a ZSet's reads from Python, "
                    "which a compiled ZSet does not allow; the pure pass runs it")
def test_picking_reads_the_ring_head_whatever_the_number_of_full_lanes() -> None:
    space = keyspace()
    for i in range(2000):
        add_to(space, f"full{i}", 2)
    for _ in range(2000):
        claim_ids(space)  # every lane now holds one active job: full, out of the ring
    assert space.zset(P + b"ring") is None
    add_to(space, "free", 1)
    view = RecordingView(space)
    result = claim.plan(claim.parse([b"emq.claim", b"q", b"1000"], Config()), view,  # type: ignore[arg-type]
                        NOW, RUN_ID)
    assert group_of(space, result.reply[0]) == b"free"
    assert len(view.reads) < 25, view.reads


def test_claim_writes_the_ring_counter_and_moves_the_member_back() -> None:
    space = keyspace()
    limit_all(space, 0)
    add_to(space, "a", 2)
    add_to(space, "b", 1)
    claim_ids(space)
    assert members(space, b"ring") == [(b"b", 2), (b"a", 3)]
    assert hash_of(space, P + b"meta")[b"rr"] == b"3"


# --- slots back, re-entry ----------------------------------------------------------------
@pytest.mark.parametrize("how", ["complete", "fail-retry", "fail-dead", "requeue"])
def test_leaving_active_gives_the_slot_back(how: str) -> None:
    space = keyspace()
    add_to(space, "a", 2)
    add_to(space, "b", 1)
    (job_id,) = claim_ids(space)
    assert hash_of(space, P + b"gactive") == {b"a": b"1"}
    assert members(space, b"ring") == [(b"b", 2)]
    token = row(space, job_id)[b"attempts"]
    if how == "complete":
        run(complete, ["emq.complete", "q", job_id, token], space)
    elif how == "requeue":
        run(requeue, ["emq.requeue", "q", job_id, token], space)
    else:
        run(fail, ["emq.fail", "q", job_id, token, "MAXATTEMPTS",
                   1 if how == "fail-dead" else 5], space)
    assert hash_of(space, P + b"gactive") is None
    assert members(space, b"ring") == [(b"b", 2), (b"a", 3)]  # back at the end
    checked(space)


def test_requeue_goes_back_to_the_front_of_its_lane() -> None:
    space = keyspace()
    add_to(space, "a", 2)
    (job_id,) = claim_ids(space)
    run(requeue, ["emq.requeue", "q", job_id, b"1"], space)
    assert members(space, b"lane:a") == [(job_id, 0), (b"2", 2)]
    assert members(space, b"pending") == []
    assert hash_of(space, P + b"meta")[b"lanes_pending"] == b"2"
    checked(space)


def test_completing_the_last_job_of_a_lane_leaves_no_trace() -> None:
    space = keyspace()
    add_to(space, "a")
    (job_id,) = claim_ids(space)
    finish(space, job_id)
    for key in (b"ring", b"gactive", b"lane:a"):
        assert P + key not in space.data
    checked(space)


def test_corrupt_gactive_refuses_with_hincrby_text_and_writes_nothing() -> None:
    space = keyspace()
    add_to(space, "a", 2)
    (job_id,) = claim_ids(space)
    set_field(space, P + b"gactive", b"a", b"x")
    before = snapshot(space)
    assert drive(complete, ["emq.complete", "q", job_id, b"1"], space) == errors.HASH_NOT_INTEGER
    assert effects(drive(claim, ["emq.claim", "q", "10"], space)) == effects(Plan([], NULL_ARRAY))
    assert snapshot(space) == before


def test_corrupt_lane_limit_refuses() -> None:
    space = keyspace(**{"emq:{q}:glimit": {"a": "-1"}})
    assert drive(add, ["emq.add", "q", "x", "GROUP", "a"], space) == errors.corrupt_lane_limit(b"a")
    assert snapshot(space) == snapshot(keyspace(**{"emq:{q}:glimit": {"a": "-1"}}))


# --- EMQ.LANE.LIMIT ---------------------------------------------------------------------
def test_raising_a_limit_puts_the_lane_back_in_the_ring() -> None:
    space = keyspace()
    add_to(space, "a", 3)
    claim_ids(space)
    assert space.zset(P + b"ring") is None
    run(lane_limit, ["emq.lane.limit", "q", "a", "0"], space)
    assert members(space, b"ring") == [(b"a", 2)]
    assert hash_of(space, P + b"glimit") == {b"a": b"0"}
    checked(space)
    assert len(claim_ids(space, 5)) == 2
    run(lane_limit, ["emq.lane.limit", "q", "a", "2"], space)
    checked(space)


def test_lowering_a_limit_takes_the_lane_out() -> None:
    space = keyspace()
    limit_all(space, 0)
    add_to(space, "a", 3)
    add_to(space, None, 1)
    claim_ids(space)
    run(lane_limit, ["emq.lane.limit", "q", "a", "1"], space)
    assert space.zset(P + b"ring") is None  # a is full, and the flat queue needs no ring
    checked(space, 0)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["emq.lane.limit", "q", "a", "-1"], errors.must_be_non_negative("n")),
        (["emq.lane.limit", "q", "a", "01"], errors.must_be_non_negative("n")),
        (["emq.lane.limit", "q", "{a}", "1"], errors.INVALID_GROUP),
        (["emq.lane.limit", "", "a", "1"], errors.INVALID_QUEUE),
    ],
)
def test_lane_limit_refusals(argv: list, error: errors.ReplyError) -> None:
    assert drive(lane_limit, argv, keyspace()) == error


# --- EMQ.LANES and EMQ.STATS --------------------------------------------------------------
def test_lanes_lists_waiting_and_active_per_group() -> None:
    space = keyspace()
    add_to(space, "b", 3)
    add_to(space, "a", 1)
    add_to(space, "c", 1)
    add_to(space, None, 4)
    claim_ids(space, 3)  # one of each lane (limit 1): c is now empty but active
    assert drive(lane_list, ["emq.lanes", "q"], space) == {
        b"a": [0, 1], b"b": [2, 1], b"c": [0, 1]}
    assert drive(lane_list, ["emq.lanes", "other"], space) == {}


def test_stats_counts_lane_jobs_as_pending() -> None:
    space = keyspace()
    add_to(space, "a", 3)
    add_to(space, None, 2)
    claim_ids(space, 2)
    reply = drive(stats, ["emq.stats", "q"], space)
    assert (reply[b"pending"], reply[b"active"]) == (3, 2)



# --- the other verbs that move lane jobs ------------------------------------------------
def test_remove_of_a_lanes_last_waiting_job_takes_the_lane_out_of_the_ring() -> None:
    space = keyspace()
    add_to(space, "a")
    add_to(space, "b")
    assert run(remove, ["emq.remove", "q", "1"], space) == 1
    assert members(space, b"ring") == [(b"b", 2)]
    assert hash_of(space, P + b"meta")[b"lanes_pending"] == b"1"
    checked(space)


@pytest.mark.parametrize(("epoch", "max_stalled", "verdict"),
                         [(OTHER_RUN_ID, 1, "recovered"), (RUN_ID, 2, "recovered"),
                          (RUN_ID, 1, "dead")])
def test_every_sweep_verdict_gives_the_slot_back(epoch: bytes, max_stalled: int,
                                                verdict: str) -> None:
    space = keyspace()
    add_to(space, "a", 2)
    run(claim, ["emq.claim", "q", 10], space, run_id=epoch)
    reply = run(stalled_check, ["emq.stalled.check", "q", "MAXSTALLED", max_stalled], space,
                now=NOW + 20)
    assert reply == ([[b"1"], []] if verdict == "recovered" else [[], [b"1"]])
    assert hash_of(space, P + b"gactive") is None
    if verdict == "recovered":
        assert members(space, b"lane:a") == [(b"1", 0), (b"2", 2)]  # its lane's front
    checked(space)


def test_promote_and_revive_return_a_lane_job_to_its_lane() -> None:
    space = keyspace()
    add_to(space, "a", 1, "MAXATTEMPTS", 2)
    (job_id,) = claim_ids(space)
    assert run(fail, ["emq.fail", "q", job_id, b"1", "BACKOFF", 5], space) == [b"scheduled", 1]
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 5) == 1
    assert members(space, b"lane:a") == [(job_id, 0)]
    checked(space)
    claim_ids(space)
    assert run(fail, ["emq.fail", "q", job_id, b"2"], space) == [b"dead", 2]
    assert space.zset(P + b"ring") is None
    assert run(revive, ["emq.revive", "q", job_id], space) == "OK"
    assert members(space, b"lane:a") == [(job_id, 0)]
    assert members(space, b"ring") == [(b"a", 3)]
    checked(space)
