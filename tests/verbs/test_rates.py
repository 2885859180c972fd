"""Rate limits: EMQ.RATE, EMQ.LANE.RATE, CLAIM under them, and the planner that puts a
lane back in the ring when its window has room (emqd/verbs/rate_release.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from emqd import errors
from emqd.commit.plan import RATED, Block, Plan
from emqd.config import Config
from emqd.verbs import claim, lane_rate, rate, rate_release
from emqd.verbs import queue_config as config
from tests.verbs.jobs import P, add_jobs, check_invariant, check_lanes, members, run, snapshot
from tests.verbs.planner import NOW, KeysRead, drive, hash_of, keyspace, set_field, sliced

SECOND = 1000


def claimed(space: Any, count: int, now: int) -> list[bytes]:
    reply = run(claim, ["emq.claim", "q", 60_000, "COUNT", count], space, now=now)
    return [job[0] for job in reply]


def test_claim_hands_out_what_the_window_allows() -> None:
    space = keyspace()
    add_jobs(space, 10)
    assert run(rate, ["emq.rate", "q", 3, SECOND], space) == "OK"
    assert hash_of(space, P + b"meta")[b"rate_max"] == b"3"
    assert claimed(space, 2, NOW) == [b"1", b"2"]
    assert claimed(space, 5, NOW + 10) == [b"3"]  # one left in this window
    assert claimed(space, 5, NOW + 999) == []
    assert members(space, b"rate:claims") == [(b"1:1", NOW), (b"2:1", NOW), (b"3:1", NOW + 10)]
    assert claimed(space, 5, NOW + SECOND) == [b"4", b"5"]  # the first two left the window
    assert members(space, b"rate:claims") == [(b"3:1", NOW + 10), (b"4:1", NOW + SECOND),
                                              (b"5:1", NOW + SECOND)]
    check_invariant(space)


def test_a_blocked_claim_is_woken_when_the_window_frees() -> None:
    space = keyspace()
    add_jobs(space, 3)
    run(rate, ["emq.rate", "q", 2, SECOND], space)
    claimed(space, 2, NOW + 5)
    parked = drive(claim, ["emq.claim", "q", 60_000, "BLOCK", 0], space, now=NOW + 300)
    assert isinstance(parked, Block) and parked.wake_at_ms == NOW + 5 + SECOND
    nothing = drive(claim, ["emq.claim", "q", 60_000], space, now=NOW + 300)
    assert isinstance(nothing, Plan) and nothing.ops == []
    empty = keyspace()
    run(rate, ["emq.rate", "q", 2, SECOND], empty)
    waiting = drive(claim, ["emq.claim", "q", 60_000, "BLOCK", 0], empty)
    assert isinstance(waiting, Block) and waiting.wake_at_ms is None  # no job: ADD wakes it


def test_a_queue_without_a_limit_reads_no_window() -> None:
    space = keyspace()
    add_jobs(space, 1)
    view = KeysRead(space)
    claim.plan(claim.parse([b"emq.claim", b"q", b"1000"], Config()), view, NOW, b"r")
    assert view.keys and all(b"rate" not in key for key in view.keys)


def test_rate_off_drops_the_limit_and_the_window() -> None:
    space = keyspace()
    add_jobs(space, 3)
    run(rate, ["emq.rate", "q", 1, SECOND], space)
    claimed(space, 3, NOW)
    assert run(rate, ["emq.rate", "q", "off"], space) == "OK"
    assert b"rate_max" not in hash_of(space, P + b"meta")
    assert space.type_name(P + b"rate:claims") == "none"
    assert claimed(space, 3, NOW) == [b"2", b"3"]
    assert drive(rate, ["emq.rate", "q", "OFF"], space).ops == []


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["q", "0", "1000"], errors.must_be_positive("MAX")),
        (["q", "5", "-1"], errors.must_be_positive("PER_MS")),
        (["q", "5"], errors.SYNTAX),
        (["q", "on"], errors.SYNTAX),
        (["q", "1", "2", "3"], errors.SYNTAX),
    ],
)
def test_refusals(argv: list, error: Any) -> None:
    assert drive(rate, ["emq.rate", *argv], keyspace()) == error
    assert drive(lane_rate, ["emq.lane.rate", argv[0], "g", *argv[1:]], keyspace()) == error


def test_a_corrupt_limit_refuses_the_claim() -> None:
    space = keyspace()
    add_jobs(space, 1)
    run(rate, ["emq.rate", "q", 1, SECOND], space)
    set_field(space, P + b"meta", b"rate_per_ms", b"soon")
    before = snapshot(space)
    assert drive(claim, ["emq.claim", "q", 1000], space) == errors.corrupt_rate(b"queue 'q'")
    assert snapshot(space) == before


def lanes_world() -> Any:
    space = keyspace()
    run(config, ["emq.config", "q", "SET", "lane_limit", "0"], space)
    add_jobs(space, 5, "GROUP", "g")
    add_jobs(space, 2, "GROUP", "h")
    return space


def test_a_lane_at_its_rate_leaves_the_ring_until_its_window_frees() -> None:
    space = lanes_world()
    plan = drive(lane_rate, ["emq.lane.rate", "q", "g", 2, SECOND], space)
    assert plan.ops[0] == (b"HSET", P + b"grate", b"g", b"2:1000")
    space.apply(plan.ops)
    got = drive(claim, ["emq.claim", "q", 60_000, "COUNT", 10], space)
    assert [job[0] for job in got.reply] == [b"1", b"6", b"2", b"7"]  # g twice, h twice
    assert (RATED, b"q", NOW + SECOND) in got.due
    space.apply(got.ops)
    assert members(space, b"rated") == [(b"g", NOW + SECOND)]
    assert [m for m, _ in members(space, b"ring")] == []
    check_lanes(space, default_limit=0, now=NOW)
    assert run(sliced(rate_release), ["q"], space, now=NOW + SECOND - 1) == 0
    assert run(sliced(rate_release), ["q"], space, now=NOW + SECOND) == 1
    assert [m for m, _ in members(space, b"ring")] == [b"g"]
    assert members(space, b"rated") == []
    assert claimed(space, 10, NOW + SECOND) == [b"3", b"4"]
    check_invariant(space)


def test_lowering_a_lane_rate_holds_it_and_off_frees_it() -> None:
    space = lanes_world()
    run(lane_rate, ["emq.lane.rate", "q", "g", 3, SECOND], space)
    claimed(space, 2, NOW)  # one of each lane
    assert members(space, b"rated") == []
    run(lane_rate, ["emq.lane.rate", "q", "g", 1, SECOND], space)
    assert members(space, b"rated") == [(b"g", NOW + SECOND)]
    assert b"g" not in {m for m, _ in members(space, b"ring")}
    assert run(lane_rate, ["emq.lane.rate", "q", "g", "OFF"], space) == "OK"
    assert members(space, b"rated") == []
    assert space.type_name(P + b"rate:lane:g") == "none"
    assert b"g" in {m for m, _ in members(space, b"ring")}
    check_lanes(space, default_limit=0, now=NOW)


def test_a_release_finds_a_window_still_full_and_waits_again() -> None:
    space = lanes_world()
    run(lane_rate, ["emq.lane.rate", "q", "g", 2, SECOND], space)
    claimed(space, 10, NOW)
    run(lane_rate, ["emq.lane.rate", "q", "g", 2, 5 * SECOND], space)
    assert members(space, b"rated") == [(b"g", NOW + 5 * SECOND)]
    space.apply([(b"ZADD", P + b"rated", NOW + SECOND, b"g")])  # a stale time
    assert run(sliced(rate_release), ["q"], space, now=NOW + SECOND) == 0
    assert members(space, b"rated") == [(b"g", NOW + 5 * SECOND)]


def test_over_the_wire(r: redis.Redis) -> None:
    for i in range(4):
        r.execute_command("EMQ.ADD", "api", f"call{i}")
    assert r.execute_command("EMQ.RATE", "api", 2, 60_000) == b"OK"
    assert len(r.execute_command("EMQ.CLAIM", "api", 1000, "COUNT", 4)) == 2
    assert r.execute_command("EMQ.CLAIM", "api", 1000) is None
    assert r.execute_command("EMQ.RATE", "api", "OFF") == b"OK"
    assert len(r.execute_command("EMQ.CLAIM", "api", 1000, "COUNT", 4)) == 2
    assert r.execute_command("EMQ.LANE.RATE", "api", "g", 1, 1000) == b"OK"
    assert r.hget("emq:{api}:grate", "g") == b"1:1000"
    r.execute_command("EMQ.ADD", "api", "x", "GROUP", "g")
    r.execute_command("EMQ.ADD", "api", "y", "GROUP", "g")
    assert [job[2] for job in r.execute_command("EMQ.CLAIM", "api", 1000, "COUNT", 4)] == [b"x"]
