"""Random interleavings of flows (protocol section 16) with every job verb, checked after
every step: section 1's invariant in both queues (a parent waits in `waiting`), the
parents' counters recomputed from their children (tests/verbs/jobs.py `check_flows`),
the lanes' bookkeeping, and that a refusal writes nothing. A parent never runs before
its children: whenever one is claimed, each of its children is settled.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emqd.errors import ReplyError
from emqd.verbs import claim, complete, fail, flow, promote, remove, requeue, revive, stalled_check
from tests.verbs.jobs import Interleaving, check_flows, check_invariant, check_lanes
from tests.verbs.planner import hash_of, keyspace

QUEUES = ("q", "r")
POLICIES = (None, "fail", "ignore", "remove")
KINDS = ("flow", "flow", "claim", "claim", "claim", "complete", "complete", "fail", "fail",
         "requeue", "sweep", "promote", "revive", "remove", "tick", "restart")


class World(Interleaving):
    def __init__(self) -> None:
        super().__init__()
        # Nothing trimmed: a dead child's row must stay for check_flows to be exact.
        self.space = keyspace(**{f"emq:{{{q}}}:config": {"keep_completed": "1000",
                                                         "keep_dead": "1000", "backoff": "5",
                                                         "max_attempts": "2"}
                                 for q in QUEUES})
        self.held: list[tuple[str, bytes, bytes]] = []
        self.jobs: list[tuple[str, bytes]] = []

    def step(self, kind: str, a: int, b: int, shape: list[int]) -> None:
        if kind == "flow":
            self._flow(a, b, shape)
        elif kind == "claim":
            queue = QUEUES[a % 2]
            for job_id, token, _, _ in self.call(claim, ["emq.claim", queue, 5 + a * 3,
                                                         "COUNT", 1 + b]):
                self._runs_after_its_children(queue, job_id)
                self.held.append((queue, job_id, token))
        elif kind in ("complete", "fail", "requeue") and self.held:
            queue, job_id, token = self.held[a % len(self.held)]
            verb = {"complete": complete, "fail": fail, "requeue": requeue}[kind]
            extra = (["RESULT", f"r{a}"] if kind == "complete" else
                     ["MAXATTEMPTS", 1 + b % 2] if kind == "fail" else [])
            reply = self.call(verb, [f"emq.{kind}", queue, job_id, token, *extra])
            if not isinstance(reply, ReplyError):
                self.held.remove((queue, job_id, token))
        elif kind in ("revive", "remove") and self.jobs:
            queue, job_id = self.jobs[(a * 7 + b) % len(self.jobs)]
            verb = revive if kind == "revive" else remove
            self.call(verb, [f"emq.{kind}", queue, job_id])
        elif kind in ("sweep", "promote"):
            for queue in QUEUES:
                if kind == "sweep":
                    self.call(stalled_check, ["emq.stalled.check", queue, "MAXSTALLED", 1 + b])
                else:
                    self.call(promote, ["emq.promote", queue])
        else:
            self.common_step(kind, a, b)

    def _flow(self, a: int, b: int, shape: list[int]) -> None:
        """A flow whose CHILD k hangs under `shape[k] % k` (0: the flow's parent)."""
        argv: list[Any] = ["emq.flow", QUEUES[a % 2], f"parent{a}"]
        policy = POLICIES[b % len(POLICIES)]
        if policy is not None:
            argv += ["ONCHILDFAIL", policy]
        for k, under in enumerate(shape, 1):
            argv += ["CHILD", QUEUES[(a + k) % 2], f"c{k}", "UNDER", under % k]
            if k == 1 and a % 3 == 0:
                argv += ["GROUP", "g"]
        reply = self.call(flow, argv)
        if isinstance(reply, ReplyError):  # a middle job with ONCHILDFAIL and no children...
            return
        parent, children = reply
        self.jobs.append((QUEUES[a % 2], parent))
        self.jobs += [(QUEUES[(a + k) % 2], child) for k, child in enumerate(children, 1)]

    def _runs_after_its_children(self, queue: str, job_id: bytes) -> None:
        row = hash_of(self.space, f"emq:{{{queue}}}:job:".encode() + job_id)
        assert row is not None and b"children_left" not in row, row


def check(world: World) -> None:
    for queue in QUEUES:
        prefix = f"emq:{{{queue}}}:".encode()
        check_invariant(world.space, prefix)
        check_lanes(world.space, prefix=prefix)
    check_flows(world.space)


step = st.tuples(st.sampled_from(KINDS), st.integers(0, 11), st.integers(0, 3),
                 st.lists(st.integers(0, 5), min_size=1, max_size=4))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=5, max_size=60))
def test_flows_keep_the_invariant_and_their_counters(steps: list) -> None:
    world = World()
    for kind, a, b, shape in steps:
        world.step(kind, a, b, shape)
        check(world)
