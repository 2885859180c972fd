"""Housekeeping's newer jobs in-process, through the real planners: the schedules' slots
(emqd/verbs/repeat_fire.py), lanes whose rate window frees (emqd/verbs/rate_release.py) and
finished rows that outlive their age limit (retention), each on a timer, no client."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any

import pytest

from emqd import clock
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core
from emqd.serve.housekeeping import Housekeeping
from emqd.store import hash as hashes
from emqd.verbs import add, claim, complete, lane_rate, repeat
from emqd.verbs import queue_config as config
from tests.serve.test_housekeeping import until
from tests.support import RecordingLog

P = b"emq:{q}:"


class World:
    """A Core with its housekeeping started, and a verb runner on it."""

    def __init__(self, preload: list | None = None) -> None:
        self.state = Core(Config(stalled_interval=0), sink=RecordingLog())
        if preload:
            self.state.keyspace.apply(preload)
        self.wakes = 0
        self.hk = Housekeeping(self.state, self._wake)
        self.hk.start(asyncio.get_running_loop())

    def _wake(self) -> None:
        self.wakes += 1

    def run(self, verb: ModuleType, *argv: Any) -> Any:
        raw = [a if isinstance(a, bytes) else str(a).encode() for a in argv]
        result = verb.plan(verb.parse(raw, self.state.config), self.state.keyspace,
                           clock.now_ms(), self.state.run_id_bytes)
        if isinstance(result, Plan):
            self.state.commit.apply(result)
            return result.reply
        return result

    def members(self, name: bytes) -> list[bytes]:
        zset = self.state.keyspace.zset(P + name)
        return [] if zset is None else list(zset.members())

    def row(self, job_id: bytes) -> dict | None:
        found = self.state.keyspace.hash(P + b"job:" + job_id)
        return None if found is None else hashes.as_dict(found)


@pytest.fixture
async def world() -> Any:
    made: list[World] = []

    def make(**kwargs: Any) -> World:
        made.append(World(**kwargs))
        return made[-1]

    yield make
    for one in made:
        one.hk.stop()


async def test_a_schedule_adds_a_job_at_each_slot_by_itself(world: Any) -> None:
    w = world()
    first = w.run(repeat, "emq.repeat", "q", "tick", "EVERY", 40, "x")
    await until(lambda: len(w.members(b"pending")) >= 3)
    ids = w.members(b"pending")
    assert ids[0] == b"tick:%d" % first
    slots = [int(job_id.rpartition(b":")[2]) for job_id in ids]
    assert len(set(slots)) == len(slots) and all(s % 40 == 0 for s in slots)
    assert w.hk.counters.repeated >= 3


async def test_slots_missed_before_a_start_give_one_job_at_once(world: Any) -> None:
    started = clock.now_ms()
    past = started - 10_000
    w = world(preload=[
        (b"HSET", P + b"repeat:tick", b"every", b"1000", b"payload", b"x"),
        (b"ZADD", P + b"repeats", past, b"tick"),
        (b"ZADD", b"emq:queues", past, b"q"),
    ])
    await until(lambda: len(w.members(b"pending")) >= 1)
    await asyncio.sleep(0.05)
    # One catch-up job for the ten missed slots, the latest's; a slot that came in the
    # 50 ms since (the clock may cross a second) gives its own job, as it should.
    slots = [int(job_id.rpartition(b":")[2]) for job_id in w.members(b"pending")]
    assert slots == sorted(set(slots)) and slots[0] >= started - 1000
    assert len([slot for slot in slots if slot <= started]) <= 1
    assert len(slots) <= 2
    next_slot = w.state.keyspace.zset(P + b"repeats").score(b"tick")
    assert next_slot > clock.now_ms()


async def test_a_clients_zadd_into_repeats_is_noticed(world: Any) -> None:
    w = world()
    w.state.commit.apply(Plan([(b"HSET", P + b"repeat:t", b"every", b"5000", b"payload", b"x"),
                         (b"ZADD", P + b"repeats", clock.now_ms() + 20, b"t")]))
    # At least one: fired just before a multiple of 5 s, the next slot's job follows
    # within milliseconds, and a wait for exactly one could miss the moment between.
    await until(lambda: len(w.members(b"pending")) >= 1)
    assert all(job_id.startswith(b"t:") for job_id in w.members(b"pending"))


async def test_a_lane_comes_back_into_the_ring_when_its_window_frees(world: Any) -> None:
    w = world()
    w.run(config, "emq.config", "q", "SET", "lane_limit", "0")
    for i in range(4):
        w.run(add, "emq.add", "q", f"p{i}", "GROUP", "g")
    w.run(lane_rate, "emq.lane.rate", "q", "g", 2, 150)
    assert len(w.run(claim, "emq.claim", "q", 60_000, "COUNT", 4)) == 2
    assert w.members(b"ring") == [] and w.members(b"rated") == [b"g"]
    waited = await until(lambda: w.members(b"ring") == [b"g"])
    assert waited < 0.5 and w.members(b"rated") == []
    assert w.hk.counters.released == 1 and w.wakes >= 1


async def test_finished_rows_are_trimmed_when_they_outlive_their_age(world: Any) -> None:
    w = world()
    w.run(config, "emq.config", "q", "SET", "keep_completed_ms", "60")
    for i in range(2):
        w.run(add, "emq.add", "q", f"p{i}")
    for _ in range(2):
        job_id, token, _, _ = w.run(claim, "emq.claim", "q", 60_000)
        w.run(complete, "emq.complete", "q", job_id, token)
    assert len(w.members(b"completed")) == 2
    await until(lambda: w.members(b"completed") == [])
    assert w.row(b"1") is None and w.row(b"2") is None
