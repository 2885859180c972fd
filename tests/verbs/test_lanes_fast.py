"""The lanes' fast paths against the general path they stand for.

CLAIM of one job from the ring's head lane (lanes.serve_one, claim's LANE_SHAPES) and
COMPLETE of a lane job whose slot comes back (lanes.slot_back, complete's LANE_SHAPES)
build their plans without the ledger. The general path (claim.round_robin: lanes.serve +
lanes.settle; complete.general) is the specification: wherever a fast path answers, its
plan must be the general path's, op for op (as the log holds them), with the same reply,
events and due. The examples below pin the common states, where the fast path must
answer; the property test walks random interleavings, corrupt values among them, and
compares at every step wherever the fast path answered.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.layout import queue_keys
from emqd.rules import settings as queue_settings
from emqd.store.keyspace import Keyspace
from emqd.verbs import add, claim, complete, lane_rate
from emqd.verbs import queue_config as config
from tests.verbs.jobs import P, members, run
from tests.verbs.planner import NOW, RUN_ID, effects, keyspace, set_field
from tests.verbs.test_lanes_properties import KINDS, LIMIT_KINDS, RATE_KINDS, World

KEYS = queue_keys(b"q")
INT64_MAX = 2**63 - 1


def same(fast: Any, general: Any) -> None:
    assert isinstance(fast, Plan) and isinstance(general, Plan), (fast, general)
    assert effects(fast) == effects(general)
    assert (fast.events, fast.due) == (general.events, general.due)


def claim_compared(space: Keyspace, count: bool = False, now: int = NOW,
                   run_id: bytes = RUN_ID) -> bool:
    """CLAIM (one job) planned on `space`, compared with the general path when the fast
    path answered; whether it did. Nothing is applied."""
    argv = [b"emq.claim", b"q", b"1000"] + ([b"COUNT", b"1"] if count else [])
    args = claim.parse(argv, Config())
    try:
        planned = claim.plan(args, space, now, run_id)
    except ReplyError:
        return False  # a refusal: the general path's, as no fast path answered
    if not (isinstance(planned, Plan) and planned.shape in claim.LANE_SHAPES.values()):
        return False
    same(planned, claim.round_robin(args, space, 1, None, now, run_id))
    return True


def complete_compared(space: Keyspace, job_id: bytes, token: bytes, result: bool = False,
                      now: int = NOW) -> bool:
    """COMPLETE of `job_id` planned on `space`, compared the same way."""
    argv = [b"emq.complete", b"q", job_id, token] + ([b"RESULT", b"r"] if result else [])
    args = complete.parse(argv, Config())
    try:
        planned = complete.plan(args, space, now, RUN_ID)
    except ReplyError:
        return False
    if planned.shape not in complete.LANE_SHAPES.values():
        return False
    row = space.hash(KEYS.job(job_id))
    assert row is not None
    the_settings = queue_settings.of_queue(space, KEYS, args.config)
    same(planned, complete.general(args, space, row, the_settings, now))
    return True


def fill(space: Keyspace, lanes: int, per_lane: int, flat: int = 0) -> None:
    for i in range(per_lane * lanes):
        run(add, ["emq.add", "q", f"p{i}", "GROUP", f"g{i % lanes}"], space)
    for i in range(flat):
        run(add, ["emq.add", "q", f"f{i}"], space)


def claim_applied(space: Keyspace) -> tuple[bytes, bytes]:
    reply = run(claim, ["emq.claim", "q", 1000], space)
    return reply[0], reply[1]


# --- the common states: the fast path answers, and plans what the general path plans ---
@pytest.mark.parametrize("limit", [0, 1, 2, 3])
@pytest.mark.parametrize("per_lane", [1, 2, 3])
@pytest.mark.parametrize("flat", [0, 2])
def test_claims_and_completes_from_lanes_take_the_fast_path(limit: int, per_lane: int,
                                                            flat: int) -> None:
    """Every claim of a lane job and every complete of one, lanes filling up, emptying,
    going to the back and coming back, at each lane limit: each plan is the general
    path's, and the fast path answers for nearly all of them."""
    space = keyspace()
    run(config, ["emq.config", "q", "SET", "lane_limit", limit], space)
    fill(space, 8, per_lane, flat)
    held: list[tuple[bytes, bytes]] = []
    fast = total = 0
    for step in range(8 * per_lane + flat):
        fast += claim_compared(space) + claim_compared(space, count=True)
        total += 2
        if not space.zset(P + b"ring") and not space.zset(P + b"pending"):
            break
        held.append(claim_applied(space))
        if step % 2:  # give slots back as the claims go
            job_id, token = held.pop(0)
            fast += complete_compared(space, job_id, token)
            fast += complete_compared(space, job_id, token, result=True)
            total += 2
            run(complete, ["emq.complete", "q", job_id, token], space)
    for job_id, token in held:
        fast += complete_compared(space, job_id, token)
        total += 1
        run(complete, ["emq.complete", "q", job_id, token], space)
    assert fast >= total // 2, (fast, total)


def test_the_head_lane_going_to_the_back_and_out() -> None:
    """lane_limit 0: a lane keeps its turn at the back (ZADD ring rr+1) while it has jobs
    and leaves once empty; gactive counts up."""
    space = keyspace()
    run(config, ["emq.config", "q", "SET", "lane_limit", 0], space)
    fill(space, 3, 2)
    planned = claim.plan(claim.parse([b"emq.claim", b"q", b"1000"], Config()), space, NOW,
                         RUN_ID)
    assert planned.shape is claim.LANE_SHAPES[(True, False)]
    ops = effects(planned)[0]
    assert ops[3:] == [(b"HSET", KEYS.gactive, b"g0", b"1"),
                       (b"ZADD", KEYS.ring, b"4", b"g0"),
                       (b"HSET", KEYS.meta, b"rr", b"4", b"lanes_pending", b"5")]
    assert claim_compared(space)


def test_the_slot_back_enters_the_ring_at_its_back() -> None:
    space = keyspace()
    fill(space, 3, 2)
    job_id, token = claim_applied(space)  # g0 full at lane_limit 1: out of the ring
    assert b"g0" not in dict(members(space, b"ring"))
    planned = complete.plan(complete.parse([b"emq.complete", b"q", job_id, token], Config()),
                            space, NOW, RUN_ID)
    assert planned.shape is complete.LANE_SHAPES[(False, False, True, True)]
    assert effects(planned)[0][-3:] == [(b"HDEL", KEYS.gactive, b"g0"),
                                        (b"ZADD", KEYS.ring, b"4", b"g0"),
                                        (b"HSET", KEYS.meta, b"rr", b"4")]
    assert complete_compared(space, job_id, token)


@pytest.mark.parametrize(("name", "key", "value"), [
    ("gactive negative", "gactive", b"-1"),
    ("gactive corrupt", "gactive", b"x"),
    ("gactive at the top", "gactive", b"%d" % INT64_MAX),
    ("rr at the top", "meta", b"%d" % INT64_MAX),
    ("rr corrupt", "meta", b"x"),
    ("lanes_pending corrupt", "meta lanes_pending", b"x"),
    ("own limit corrupt", "glimit", b"x"),
    ("queue limit corrupt", "config", b"-1"),
    ("a rate limit", "grate", b"1:1000"),
])
def test_what_the_fast_claim_does_not_answer_goes_the_general_way(
        name: str, key: str, value: bytes) -> None:
    """A stored value the fast path cannot move by one (or that refuses) leaves the CLAIM
    to the general path, which answers (or refuses) as it always did."""
    space = keyspace()
    run(config, ["emq.config", "q", "SET", "lane_limit", 0], space)
    fill(space, 3, 2)
    field = {"gactive": b"g0", "meta": b"rr", "meta lanes_pending": b"lanes_pending",
             "glimit": b"g0", "config": b"lane_limit", "grate": b"g0"}[key]
    set_field(space, P + key.split()[0].encode(), field, value)
    args = claim.parse([b"emq.claim", b"q", b"1000"], Config())
    try:
        planned = claim.plan(args, space, NOW, RUN_ID)
    except ReplyError as error:  # a refusal: the general path's own
        with pytest.raises(ReplyError) as general:
            claim.round_robin(args, space, 1, None, NOW, RUN_ID)
        assert general.value == error
        return
    assert planned.shape not in claim.LANE_SHAPES.values(), name


@pytest.mark.parametrize("case", ["rate limited", "rate window full", "ring of the lane",
                                  "ring of the flat member", "gactive at zero", "no gactive"])
def test_what_the_fast_complete_does_not_answer_goes_the_general_way(case: str) -> None:
    """COMPLETE of a lane job where the slot back may do more than the fast path knows:
    a lane with a rate limit, a ring holding one member while pending has jobs (a
    client's writes), a gactive that does not count the job: either the fast path
    answers the general path's plan, or it leaves the COMPLETE to it."""
    space = keyspace()
    fill(space, 3, 2, flat=1)
    if case.startswith("rate"):
        run(lane_rate, ["emq.lane.rate", "q", "g0", 1 if case.endswith("full") else 5, 60_000],
            space)
    job_id, token = claim_applied(space)  # g0's first job
    if case == "ring of the lane":  # g0 back in the ring, alone, while pending holds a job
        space.apply([(b"HSET", KEYS.glimit, b"g0", b"2"),
                     (b"ZREM", KEYS.ring, b"", b"g1", b"g2"), (b"ZADD", KEYS.ring, 9, b"g0")])
    elif case == "ring of the flat member":  # g1 and g2 gone from the ring by hand
        space.apply([(b"ZREM", KEYS.ring, b"g1", b"g2")])
    elif case == "gactive at zero":
        set_field(space, KEYS.gactive, b"g0", b"0")
    elif case == "no gactive":
        space.apply([(b"HDEL", KEYS.gactive, b"g0")])
    planned = complete.plan(complete.parse([b"emq.complete", b"q", job_id, token], Config()),
                            space, NOW, RUN_ID)
    if planned.shape in complete.LANE_SHAPES.values():
        assert complete_compared(space, job_id, token)
    else:
        row = space.hash(KEYS.job(job_id))
        assert row is not None
        assert effects(planned) == effects(complete.general(
            complete.parse([b"emq.complete", b"q", job_id, token], Config()), space, row,
            queue_settings.of_queue(space, KEYS, Config()), NOW))


# --- random interleavings: wherever the fast path answers, the general path agrees ---------
CORRUPT = [
    (b"gactive", b"a", b"-1"), (b"gactive", b"b", b"0"), (b"gactive", b"c", b"x"),
    (b"gactive", b"a", b"%d" % INT64_MAX), (b"meta", b"rr", b"%d" % (INT64_MAX - 1)),
    (b"meta", b"rr", b"%d" % INT64_MAX), (b"meta", b"rr", b"-3"),
    (b"meta", b"lanes_pending", b"x"), (b"meta", b"lanes_pending", b"%d" % -(2**63)),
    (b"glimit", b"b", b"x"), (b"config", b"lane_limit", b"nope"),
]
GROUPS = (None, "a", "b", "c", "d", "e")


class FastWorld(World):
    """test_lanes_properties' world with more lanes (the fast paths need a ring of a few),
    COMPLETE's Shape allowed (no keep_completed_ms), stored values corrupted, ghosts,
    corrupt rows and a ring written by hand: its invariants are not checked here, only
    that both paths agree."""

    def __init__(self) -> None:
        super().__init__()
        self.space = keyspace(**{"emq:{q}:config": {"keep_completed": "3",
                                                    "keep_log_lines": "2"}})
        self.fast = 0

    def step(self, kind: str, a: int, b: int) -> None:
        if kind == "add":
            group = GROUPS[a % len(GROUPS)]
            options = [] if group is None else ["GROUP", group]
            job_id = self.call(add, ["emq.add", "q", f"p{a}", *options,
                                     *(["PRIORITY", 1] if b == 3 else [])])
            if isinstance(job_id, bytes):  # not refused (a corrupt counter refuses)
                self.ids.append(job_id)
        elif kind == "corrupt":
            key, field, value = CORRUPT[(a * 4 + b) % len(CORRUPT)]
            set_field(self.space, P + key, field, value)
        elif kind == "ghost" and self.ids:
            self.space.data.pop(KEYS.job(self.ids[a % len(self.ids)]), None)
        elif kind == "unring":  # a client's ZREM: the ring no longer matches the lanes
            self.space.apply([(b"ZREM", KEYS.ring, (b"", b"a", b"b", b"c")[a % 4])])
        elif kind == "ring_flat":  # a client's ZADD of the flat member
            self.space.apply([(b"ZADD", KEYS.ring, a, b"")])
        elif kind == "corrupt_row" and self.ids:
            job_id = self.ids[a % len(self.ids)]
            if self.space.hash(KEYS.job(job_id)) is not None:
                set_field(self.space, KEYS.job(job_id), b"attempts", b"x")
        else:
            super().step(kind, a, b)

    def _claim(self, a: int, b: int) -> None:
        reply = self.call(claim, ["emq.claim", "q", 5 + a * 5, "COUNT", b + 1])
        if isinstance(reply, list):
            self.held += [(job[0], job[1]) for job in reply]

    def compare(self) -> None:
        self.fast += claim_compared(self.space, now=self.now, run_id=self.run_id)
        self.fast += claim_compared(self.space, count=True, now=self.now, run_id=self.run_id)
        for job_id, token in self.held:
            self.fast += complete_compared(self.space, job_id, token, now=self.now)


FAST_KINDS = KINDS + LIMIT_KINDS + RATE_KINDS + ("add",) * 8 + ("complete",) * 3
ODD_KINDS = ("corrupt", "ghost", "corrupt_row", "unring", "ring_flat")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FAST_KINDS + ODD_KINDS), st.integers(0, 11),
                          st.integers(0, 3)), min_size=5, max_size=80))
def test_the_fast_paths_plan_what_the_general_path_plans(steps: list) -> None:
    world = FastWorld()
    for kind, a, b in steps:
        world.compare()
        world.step(kind, a, b)
    world.compare()


def test_the_random_walk_reaches_the_fast_paths() -> None:
    """The property above is not vacuous: a plain walk of its kinds answers fast often."""
    world = FastWorld()
    for i in range(60):
        kind = ("add", "add", "claim", "complete", "lane_limit")[i % 5]
        world.step(kind, i % 12, i % 3)
        world.compare()
    assert world.fast >= 20, world.fast

