"""Random interleavings of every job verb from several clients, checking after each step
that every job is in exactly the one set its `state` names (protocol section 1), that no
job completes twice, that a stale token never acts, and that every refusal writes nothing;
with unique jobs among them (one live holder a key), a rate limit switched on and off
(its window never over MAX) and rows trimmed by age as well as by count.

The planner variant drives the planners against one keyspace with a controlled `now`
and run_id (a "restart" draws a new one); the wire variant does the same with a few real
connections to one server, reading its state atomically inside MULTI/EXEC.
"""

from __future__ import annotations

import random
from typing import Any

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.errors import ReplyError
from emqd.reply import NULL_ARRAY
from emqd.verbs import (
    add,
    claim,
    complete,
    extend,
    fail,
    log,
    logs,
    progress,
    rate,
    remove,
    requeue,
    revive,
    wait,
)
from tests.verbs.jobs import (
    Interleaving,
    check_claim_rate,
    check_invariant,
    check_unique,
    rate_window,
    row,
)

KINDS = ("add", "claim", "complete", "fail", "requeue", "extend", "progress", "log", "sweep",
         "promote", "revive", "remove", "wait", "logs", "tick", "restart", "unique", "rate")
HOLDER_VERBS = {"complete": complete, "fail": fail, "requeue": requeue, "extend": extend,
                "progress": progress, "log": log}
CLIENTS = 3

# Weighted so that jobs get claimed and held tokens get used (and reused once stale).
WEIGHTED = (*KINDS, "add", "add", "claim", "claim", "complete", "fail", "requeue", "extend",
            "log", "tick", "unique")
step = st.tuples(st.sampled_from(WEIGHTED), st.integers(0, CLIENTS - 1), st.integers(0, 12),
                 st.integers(0, 3))


class World(Interleaving):
    """One keyspace, a clock, an epoch, and what each simulated client believes it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[list[tuple[bytes, bytes]]] = [[] for _ in range(CLIENTS)]
        self.completed: set[bytes] = set()

    def step(self, kind: str, client: int, a: int, b: int) -> None:
        if self.common_step(kind, a, b):
            return
        if kind == "add":
            options: list = []
            if b == 1:
                options += ["DELAY", a * 5]
            if b == 2:
                options += ["PRIORITY", a % 3 - 1, "MAXATTEMPTS", 1 + a % 3]
            self.ids.append(self.call(add, ["emq.add", "q", f"p{a}", *options]))
        elif kind == "unique":
            options = ["UNIQUE", f"k{a % 3}"] + (["TTL", 5 + a] if b == 1 else [])
            job_id, verdict = self.call(add, ["emq.add", "q", f"u{a}", *options])
            if verdict == b"added":
                self.ids.append(job_id)
        elif kind == "rate":
            argv = ["OFF"] if b == 0 else [b, 10 + a * 5]
            self.call(rate, ["emq.rate", "q", *argv])
        elif kind == "claim":
            argv = ["emq.claim", "q", 5 + a * 5] + (["COUNT", b + 1] if b else [])
            if a % 4 == 0:
                argv += ["BLOCK", 10]
            window = rate_window(self.space, self.now)
            reply = self.call(claim, argv)
            check_claim_rate(window, rate_window(self.space, self.now))
            jobs = reply if b else ([reply] if isinstance(reply, list) else [])
            for job_id, token, _, _ in jobs:
                assert row(self.space, job_id)[b"attempts"] == token
                self.held[client].append((job_id, token))
        elif kind in HOLDER_VERBS:
            self._holder(kind, client, a, b)
        elif kind in ("revive", "remove") and self.ids:
            job_id = self.ids[a % len(self.ids)]
            if kind == "revive":
                self.call(revive, ["emq.revive", "q", job_id] + (["RESET"] if b else []))
            else:
                self.call(remove, ["emq.remove", "q", job_id])
        elif kind in ("wait", "logs") and self.ids:
            self._read(kind, self.ids[a % len(self.ids)])

    def _read(self, kind: str, job_id: bytes) -> None:
        """WAIT and LOGS answer from the row as it is: a finished job's outcome (nil
        for one still running: the timeout's answer), the kept lines; no row, no job."""
        current = row(self.space, job_id)
        if kind == "wait":
            reply = self.call(wait, ["emq.wait", "q", job_id, 10])
            if current is None:
                assert reply == errors.NO_SUCH_JOB
            elif current[b"state"] == b"completed":
                assert reply == [b"completed", current.get(b"result")]
            elif current[b"state"] == b"dead":
                assert reply == [b"dead", current.get(b"last_error")]
            else:
                assert reply is NULL_ARRAY, (current, reply)
        else:
            reply = self.call(logs, ["emq.logs", "q", job_id])
            assert reply == errors.NO_SUCH_JOB if current is None else len(reply) <= 2

    def _holder(self, kind: str, client: int, a: int, b: int) -> None:
        held = self.held[client] or [h for tokens in self.held for h in tokens]
        if not held:
            return
        job_id, token = held[a % len(held)]
        before = row(self.space, job_id)
        current = (before is not None and before.get(b"attempts") == token
                   and before.get(b"state") == b"active")
        extra = {"complete": ["RESULT", f"r{a}"] if b else [],
                 "fail": ["ERROR", "e"] + (["BACKOFF", a] if b else []),
                 "requeue": [], "extend": [5 + a], "progress": [f"{a * 10}%"],
                 "log": [f"line {a}"]}[kind]
        reply = self.call(HOLDER_VERBS[kind], [f"emq.{kind}", "q", job_id, token, *extra])
        assert isinstance(reply, ReplyError) != current, (kind, job_id, token, before, reply)
        if kind == "complete" and reply == "OK":
            assert job_id not in self.completed, f"{job_id!r} completed twice"
            self.completed.add(job_id)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=5, max_size=80))
def test_random_interleavings_keep_the_invariant(steps: list) -> None:
    world = World()
    for kind, client, a, b in steps:
        world.step(kind, client, a, b)
        check_invariant(world.space)
        check_unique(world.space, world.now)


# --- the same over the wire, with real connections -----------------------------------
STATES = (b"pending", b"active", b"scheduled", b"dead", b"completed")


def _check_over_the_wire(client: redis.Redis, ids: list[bytes]) -> None:
    """Read in one EXEC (atomic): each job's state, whether it has a log, and its score
    in every set. A job with a row is in exactly the one set its state names; an id
    without a row is in none and has no log; and STATS' set sizes agree."""
    pipe = client.pipeline(transaction=True)
    for job_id in ids:
        pipe.hget(b"emq:{q}:job:" + job_id, "state")
        pipe.exists(b"emq:{q}:log:" + job_id)
        for state in STATES:
            pipe.zscore(b"emq:{q}:" + state, job_id)
    pipe.execute_command("EMQ.STATS", "q")
    *replies, stats = pipe.execute()
    width = 2 + len(STATES)
    states = []
    for n, job_id in enumerate(ids):
        state, logged, *scores = replies[n * width:(n + 1) * width]
        assert state is not None or not logged, job_id  # a log goes with its row
        holding = [s for s, score in zip(STATES, scores, strict=True) if score is not None]
        assert holding == ([state] if state is not None else []), (job_id, state, holding)
        states.append(state)
    if isinstance(stats, list):
        stats = dict(zip(stats[::2], stats[1::2], strict=True))
    for state in STATES:
        assert stats[state] == states.count(state), (state, stats)


def test_random_interleavings_over_the_wire(rq: redis.Redis, no_sweep_server: Any) -> None:
    clients = [redis.Redis(port=no_sweep_server.port) for _ in range(CLIENTS)]
    rng = random.Random(20261130)
    ids: list[bytes] = []
    held: list[list[tuple[bytes, bytes]]] = [[] for _ in clients]
    completed: set[bytes] = set()
    rq.execute_command("EMQ.CONFIG", "q", "SET", "backoff", "0", "keep_completed", "5")
    try:
        for _ in range(300):
            i = rng.randrange(CLIENTS)
            c = clients[i]
            kind = rng.choice(("add", "add", "claim", "claim", "holder", "holder", "sweep",
                               "promote", "revive", "remove"))
            if kind == "add":
                ids.append(c.execute_command("EMQ.ADD", "q", "x", "MAXATTEMPTS",
                                             rng.randint(1, 3)))
            elif kind == "claim":
                for job in c.execute_command("EMQ.CLAIM", "q", rng.choice((1, 60000)),
                                             "COUNT", rng.randint(1, 3)):
                    held[i].append((job[0], job[1]))
            elif kind == "holder" and held[i]:
                job_id, token = rng.choice(held[i])
                verb = rng.choice(("EMQ.COMPLETE", "EMQ.FAIL", "EMQ.REQUEUE", "EMQ.EXTEND",
                                   "EMQ.PROGRESS", "EMQ.LOG"))
                extra = {"EMQ.EXTEND": ["60000"], "EMQ.PROGRESS": ["50"], "EMQ.LOG": ["l"]}
                argv = [verb, "q", job_id, token, *extra.get(verb, [])]
                try:
                    reply = c.execute_command(*argv)
                except redis.ResponseError as error:
                    assert str(error).startswith("EMQSTALE"), error
                    continue
                if verb == "EMQ.COMPLETE":
                    assert reply == b"OK" and job_id not in completed
                    completed.add(job_id)
            elif kind == "sweep":
                c.execute_command("EMQ.STALLED.CHECK", "q", "MAXSTALLED", 3)
            elif kind == "promote":
                c.execute_command("EMQ.PROMOTE", "q")
            elif kind in ("revive", "remove") and ids:
                try:
                    c.execute_command(f"EMQ.{kind.upper()}", "q", rng.choice(ids))
                except redis.ResponseError as error:
                    assert str(error).startswith("EMQSTATE"), error
            _check_over_the_wire(rq, ids)
    finally:
        for c in clients:
            c.close()
    assert completed  # the run exercised completion at all
