"""Random interleavings with lanes (protocol section 8), checked after every step.

Hypothesis drives the planners against one keyspace, with groups among the jobs, a
controlled `now` and run_id (a "restart" draws a new one), and checks after each step:
section 1's invariant (each job in exactly the one set its state names, a waiting lane
job in its own lane), `gactive` equal to the real count of active lane jobs, the ring
holding exactly the servable members, `lanes_pending` equal to the lanes' total; that a
CLAIM takes each lane's jobs from its front (priority, then add order) and never beyond
its limit; and that a refusal writes nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from emqd.errors import ReplyError
from emqd.verbs import (
    add,
    claim,
    complete,
    fail,
    lane_limit,
    lane_rate,
    rate_release,
    remove,
    requeue,
    revive,
)
from emqd.verbs import (
    queue_config as config,
)
from tests.verbs.jobs import Interleaving, check_invariant, check_lanes, members, row
from tests.verbs.planner import hash_of, sliced

GROUPS = (None, "a", "b", "c")
KINDS = ("add", "add", "add", "claim", "claim", "claim", "complete", "complete", "fail",
         "requeue", "sweep", "tick", "promote", "revive", "remove", "restart")
LIMIT_KINDS = ("lane_limit", "queue_limit")
RATE_KINDS = ("lane_rate", "lane_rate", "release", "release", "tick")
P = b"emq:{q}:"


def steps(kinds: tuple[str, ...]) -> Any:
    return st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 11), st.integers(0, 3)),
                    min_size=5, max_size=60)


class World(Interleaving):
    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[bytes, bytes]] = []

    def limit(self, group: bytes) -> int:
        own = (hash_of(self.space, P + b"glimit") or {}).get(group)
        if own is not None:
            return int(own)
        return int((hash_of(self.space, P + b"config") or {}).get(b"lane_limit", b"1"))

    def windows(self) -> dict[bytes, tuple[int, int]]:
        """Each rate-limited lane's claims in its window now, and its MAX."""
        found = {}
        for group, rule in (hash_of(self.space, P + b"grate") or {}).items():
            most, per = map(int, rule.split(b":"))
            window = members(self.space, b"rate:lane:" + group)
            found[group] = (sum(1 for _, at in window if at > self.now - per), most)
        return found

    def active_of(self, group: bytes) -> int:
        return sum(1 for job_id, _ in members(self.space, b"active")
                   if (row(self.space, job_id) or {}).get(b"group") == group)

    def step(self, kind: str, a: int, b: int) -> None:
        if self.common_step(kind, a, b):
            return
        if kind == "add":
            group = GROUPS[a % len(GROUPS)]
            options: list = [] if group is None else ["GROUP", group]
            if b == 1:
                options += ["DELAY", a * 5]
            if b == 2:
                options += ["PRIORITY", a % 3 - 1, "MAXATTEMPTS", 1 + a % 2]
            self.ids.append(self.call(add, ["emq.add", "q", f"p{a}", *options]))
        elif kind == "claim":
            self._claim(a, b)
        elif kind in ("complete", "fail", "requeue") and self.held:
            job_id, token = self.held[a % len(self.held)]
            verb = {"complete": complete, "fail": fail, "requeue": requeue}[kind]
            extra = ["ERROR", "e"] if kind == "fail" else []
            reply = self.call(verb, [f"emq.{kind}", "q", job_id, token, *extra])
            if not isinstance(reply, ReplyError):
                self.held.remove((job_id, token))
        elif kind in ("revive", "remove") and self.ids:
            job_id = self.ids[a % len(self.ids)]
            verb = revive if kind == "revive" else remove
            self.call(verb, [f"emq.{kind}", "q", job_id])
        elif kind == "lane_limit":
            self.call(lane_limit, ["emq.lane.limit", "q", GROUPS[1 + a % 3], b % 3])
        elif kind == "queue_limit":
            self.call(config, ["emq.config", "q", "SET", "lane_limit", b % 3])
        elif kind == "lane_rate":
            argv = ["OFF"] if b == 0 else [b, 10 + a * 10]
            self.call(lane_rate, ["emq.lane.rate", "q", GROUPS[1 + a % 3], *argv])
        elif kind == "release":  # what housekeeping runs when a lane's window frees
            self.call(sliced(rate_release), ["q"])

    def _claim(self, a: int, b: int) -> None:
        fronts = {group: [m for m, _ in members(self.space, b"lane:" + group)]
                  for group in (b"a", b"b", b"c")}
        reply = self.call(claim, ["emq.claim", "q", 5 + a * 5, "COUNT", b + 1])
        taken: dict[bytes, list[bytes]] = {}
        for job_id, token, _, _ in reply:
            self.held.append((job_id, token))
            group = row(self.space, job_id).get(b"group")
            if group is not None:
                taken.setdefault(group, []).append(job_id)
        for group, ids in taken.items():
            # From the lane's front, in order (ghost and corrupt rows aside: none here) ...
            assert ids == fronts[group][: len(ids)], (group, ids, fronts[group])
            # ... and never beyond the lane's limit.
            limit = self.limit(group)
            assert limit == 0 or self.active_of(group) <= limit, (group, limit)


def check(world: World) -> None:
    check_invariant(world.space)
    check_lanes(world.space, now=world.now)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(KINDS))
def test_with_lane_limit_one_never_two_active_jobs_of_one_group(plan: list) -> None:
    world = World()
    for kind, a, b in plan:
        world.step(kind, a, b)
        check(world)
        for group in (b"a", b"b", b"c"):
            assert world.active_of(group) <= 1, group


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(KINDS + LIMIT_KINDS))
# Found by hypothesis: two lanes entering a queue with no ring while pending holds a job
# (PROMOTE of a lane's retry and a delayed lane job) left the flat member out of the ring.
@example([("add", 0, 0), ("add", 1, 0), ("add", 2, 1), ("claim", 0, 0), ("fail", 0, 0),
          ("tick", 2, 0), ("promote", 0, 0)])
def test_limits_changing_under_load_keep_the_ring_exact(plan: list) -> None:
    world = World()
    for kind, a, b in plan:
        world.step(kind, a, b)
        check(world)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(KINDS + LIMIT_KINDS + RATE_KINDS))
def test_lane_rates_keep_the_ring_exact_and_their_windows(plan: list) -> None:
    """A lane whose rate window is full is out of the ring and waits in `rated`; CLAIM
    never puts more in a lane's window than its MAX allows."""
    world = World()
    for kind, a, b in plan:
        before = world.windows()
        world.step(kind, a, b)
        check(world)
        if kind == "claim":
            for group, (inside, most) in world.windows().items():
                was, _ = before.get(group, (0, most))
                assert inside <= max(most, was) and (was < most or inside == was), group
