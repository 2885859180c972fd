"""Housekeeping's machinery in-process, with small fake planners in the verbs' shape.

The fakes keep only what the timers care about (which members are due, and a
corrupt row that refuses the whole call), so these tests pin the clock work:
when slices run, how they are sliced, refused and retried. The real PROMOTE,
STALLED.CHECK and retention planners are exercised over the wire in
tests/serve/test_housekeeping_wire.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import uvloop

from emqd import clock, errors
from emqd.commands.server import info_section
from emqd.commit.dues import Deadlines
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core
from emqd.layout import queue_keys
from emqd.serve.housekeeping import SLICE, Housekeeping, Planners
from emqd.store import hash as hashes
from tests.support import RecordingLog

K = queue_keys(b"q")


# --- fake planners: slice_args(queue, limit, config) / plan(args, view, now, run_id) ---
def _slice_args(queue: bytes, limit: int, config: Config) -> tuple:
    return queue_keys(queue), limit


def _due(view: Any, key: bytes, now: int, limit: int) -> list[bytes]:
    zset = view.zset(key)
    return [] if zset is None else zset.due(now, limit)


def _promote_plan(args: tuple, view: Any, now: int, run_id: bytes) -> Any:
    keys, limit = args
    ids = _due(view, keys.scheduled, now, limit)
    if not ids:
        return 0
    ops = [(b"ZREM", keys.scheduled, *ids)]
    ops += [(b"ZADD", keys.pending, 0, i) for i in ids]
    return Plan(ops, len(ids), None, ())


def _sweep_plan(args: tuple, view: Any, now: int, run_id: bytes) -> Any:
    keys, limit = args
    ids = _due(view, keys.active, now, limit)
    for i in ids:
        row = view.hash(keys.job(i))
        if row is not None and hashes.get(row, b"stalled") == b"bad":
            raise errors.HASH_NOT_INTEGER()  # the whole call is refused
    if not ids:
        return [[], []]
    ops = [(b"ZREM", keys.active, *ids)] + [(b"ZADD", keys.pending, 0, i) for i in ids]
    return Plan(ops, [ids, []], None, ())


def _retention_plan(keys: Any, view: Any, now: int, run_id: bytes) -> Any:
    completed = view.zset(keys.completed)
    config = view.hash(keys.config)
    keep = None if config is None else hashes.get(config, b"keep_completed")
    excess = min((0 if completed is None else len(completed)) - int(keep or b"1000"), SLICE)
    if excess <= 0:
        return 0
    ids = completed.head(excess)
    return Plan([(b"ZREM", keys.completed, *ids), (b"DEL", *(keys.job(i) for i in ids))],
                len(ids), None, ())


def fakes() -> Planners:
    return Planners(
        promote=SimpleNamespace(slice_args=_slice_args, plan=_promote_plan,
                                __name__="fake_promote"),
        stalled=SimpleNamespace(slice_args=_slice_args, plan=_sweep_plan, __name__="fake_stalled"),
        retention=SimpleNamespace(slice_args=lambda queue, config: queue_keys(queue),
                                  plan=_retention_plan, __name__="fake_retention"),
    )  # type: ignore[arg-type]


# --- helpers ----------------------------------------------------------------------
class Rig:
    """A Core with housekeeping started on the running loop; records and wakes counted."""

    def __init__(self, stalled_interval: int = 50, preload: list | None = None) -> None:
        log = RecordingLog()
        self.state = Core(Config(stalled_interval=stalled_interval), sink=log)
        self.records = log.records
        self.wakes = 0
        if preload:
            self.state.keyspace.apply(preload)
        self.hk = Housekeeping(self.state, self._wake, fakes())
        self.hk.start(asyncio.get_running_loop())

    def _wake(self) -> None:
        self.wakes += 1

    def commit(self, ops: list) -> None:
        """A plain Redis command's plan (housekeeping reads its ops)."""
        self.state.commit.apply(Plan(ops))

    def zset(self, key: bytes) -> list[bytes]:
        zset = self.state.keyspace.zset(key)
        return [] if zset is None else [member for _, member in zset]


async def until(condition: Callable[[], bool], timeout: float = 2.0) -> float:
    """Seconds until `condition` held (bounded: fails after `timeout`)."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError("condition not reached within the bound")
        await asyncio.sleep(0.002)
    return time.monotonic() - start


@pytest.fixture
async def rig() -> Any:
    made: list[Rig] = []

    def make(**kwargs: Any) -> Rig:
        made.append(Rig(**kwargs))
        return made[-1]

    yield make
    for one in made:
        one.hk.stop()


# --- Deadlines --------------------------------------------------------------------
async def test_deadlines_fire_each_queue_once_at_its_earliest_time() -> None:
    fired: list[tuple[bytes, int]] = []
    deadlines = Deadlines()
    deadlines.start(asyncio.get_running_loop(), lambda queue, now: fired.append((queue, now)))
    now = clock.now_ms()
    deadlines.note(b"late", now + 60)
    deadlines.note(b"soon", now + 20)
    deadlines.note(b"soon", now + 40)  # later than known: ignored
    deadlines.note(b"late", now + 30)  # earlier: replaces; the old entry goes stale
    await until(lambda: len(fired) == 2)
    await asyncio.sleep(0.06)  # past the stale entry's time
    deadlines.stop()
    assert [queue for queue, _ in fired] == [b"soon", b"late"]
    assert fired[0][1] >= now + 20 and fired[1][1] >= now + 30
    assert deadlines.heap == [] and deadlines.earliest == {}


async def test_many_due_queues_are_served_a_few_per_loop_turn(monkeypatch: Any) -> None:
    monkeypatch.setattr("emqd.commit.dues.QUEUES_PER_TURN", 2)
    turns: list[list[bytes]] = [[]]
    deadlines = Deadlines()
    loop = asyncio.get_running_loop()

    def next_turn() -> None:  # marks each loop iteration
        turns.append([])
        if len(turns) < 50:
            loop.call_soon(next_turn)

    deadlines.start(loop, lambda queue, now: turns[-1].append(queue))
    now = clock.now_ms()
    for i in range(5):
        deadlines.note(b"q%d" % i, now - 1)
    loop.call_soon(next_turn)
    await until(lambda: sum(map(len, turns)) == 5)
    deadlines.stop()
    assert max(map(len, turns)) == 2
    assert sorted(q for turn in turns for q in turn) == [b"q%d" % i for i in range(5)]


async def test_a_failing_job_is_logged_and_retried_not_fatal(caplog: Any) -> None:
    calls: list[bytes] = []

    def due(queue: bytes, now: int) -> None:
        calls.append(queue)
        raise RuntimeError("bug")

    deadlines = Deadlines()
    deadlines.start(asyncio.get_running_loop(), due)
    deadlines.note(b"q", clock.now_ms())
    with caplog.at_level(logging.ERROR, logger="emqd"):
        await until(lambda: len(calls) == 1)
    deadlines.stop()
    assert deadlines.earliest[b"q"] >= clock.now_ms() + 500  # a retry later, not a spin
    assert "housekeeping" in caplog.text


def _order_after_a_long_callback(after_io: bool) -> list[str]:
    """On uvloop: a deadline passes while one socket's callback holds the loop and, meanwhile,
    bytes land in another socket. Returns the order in which the loop then served them."""
    order: list[str] = []
    deadlines = Deadlines(after_io=after_io)
    heavy_peer, heavy_end = socket.socketpair()
    beat_peer, beat_end = socket.socketpair()

    class Recorder(asyncio.Protocol):
        def __init__(self, name: str) -> None:
            self.name = name

        def data_received(self, data: bytes) -> None:
            order.append(self.name)
            if self.name == "heavy":
                time.sleep(0.08)  # one long command; the deadline passes meanwhile
                beat_peer.sendall(b"EXTEND")  # a heartbeat sent before the loop comes back

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        heavy, _ = await loop.connect_accepted_socket(lambda: Recorder("heavy"), heavy_end)
        beat, _ = await loop.connect_accepted_socket(lambda: Recorder("heartbeat"), beat_end)
        try:
            deadlines.start(loop, lambda queue, now: order.append("sweep"))
            deadlines.note(b"q", clock.now_ms() + 30)
            heavy_peer.sendall(b"KEYS *")
            for _ in range(100):  # bounded: 1 s
                if len(order) == 3:
                    break
                await asyncio.sleep(0.01)
        finally:
            deadlines.stop()
            heavy.close()
            beat.close()
            await asyncio.sleep(0.01)  # the transports close on the next iterations

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()
        for sock in (heavy_peer, beat_peer):
            sock.close()
    return order


def test_uvloop_runs_a_due_timer_before_the_bytes_waiting_in_a_socket() -> None:
    """Why the sweep waits: without it, the timer wins over a heartbeat already sent."""
    assert _order_after_a_long_callback(after_io=False) == ["heavy", "sweep", "heartbeat"]


def test_a_fired_sweep_waits_until_the_sockets_were_read() -> None:
    assert _order_after_a_long_callback(after_io=True) == ["heavy", "heartbeat", "sweep"]


async def test_a_waiting_sweep_judges_as_of_the_time_it_fired() -> None:
    fired: list[int] = []
    deadlines = Deadlines(after_io=True)
    deadlines.start(asyncio.get_running_loop(), lambda queue, now: fired.append(now))
    at = clock.now_ms() + 10
    deadlines.note(b"q", at)
    later = at + 200  # a gap a loaded machine's late timer does not cross
    deadlines.note(b"r", later)  # not due when the timer fires: judged at the next firing
    await until(lambda: len(fired) == 2)
    deadlines.stop()
    assert at <= fired[0] < later <= fired[1]


def test_a_sweep_held_up_by_the_loop_waits_as_long_before_judging() -> None:
    """A deadline passes while one callback holds the loop for HOLD_S: the sweep then
    gives the sockets as long again (a heartbeat answered just before the hold got its
    reply only after it, and its worker's next one comes later still), and judges as
    of the time it fired."""
    hold_s = 0.4
    judged: list[tuple[int, int]] = []  # (the time judged as of, the time it ran)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(after_io=True)
        deadlines.start(loop, lambda queue, now: judged.append((now, clock.now_ms())))
        deadlines.note(b"q", clock.now_ms() + 20)
        loop.call_soon(time.sleep, hold_s)  # one long command; the deadline passes meanwhile
        try:
            for _ in range(300):  # bounded: 3 s
                if judged:
                    break
                await asyncio.sleep(0.01)
        finally:
            deadlines.stop()

    started = clock.now_ms()
    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert len(judged) == 1
    as_of, ran = judged[0]
    late_ms = as_of - (started + 20)
    assert late_ms >= hold_s * 1000 - 40  # it fired once the hold was over
    assert ran - as_of >= late_ms - 20  # and waited about as long again


# --- promotion ----------------------------------------------------------------------
async def test_a_scheduled_job_is_promoted_at_its_due_time(rig: Any) -> None:
    r = rig()
    due = clock.now_ms() + 120
    r.commit([(b"ZADD", K.scheduled, due, b"1")])
    await asyncio.sleep(0.02)
    assert r.zset(K.pending) == []  # not before its time
    await until(lambda: r.zset(K.pending) == [b"1"])
    late_ms = clock.now_ms() - due
    assert late_ms < 500  # a generous functional bound; the timer aims at the due time itself
    assert r.hk.counters.promoted == 1 and r.wakes >= 1
    assert r.records[-1][0] == (b"ZREM", K.scheduled, b"1")  # logged like any plan


async def test_a_backlog_is_promoted_in_slices_one_plan_each(rig: Any) -> None:
    r = rig()
    now = clock.now_ms()
    r.commit([(b"ZADD", K.scheduled, *[x for i in range(250) for x in (now - 5, b"%d" % i)])])
    await until(lambda: len(r.zset(K.pending)) == 250)
    plans = [record for record in r.records if record[0][0] == b"ZREM"]
    assert [len(plan[0]) - 2 for plan in plans] == [100, 100, 50]
    assert r.zset(K.scheduled) == [] and r.hk.counters.promoted == 250


async def test_only_scheduled_zadds_of_emq_queues_are_noticed(rig: Any) -> None:
    r = rig()
    now = clock.now_ms()
    r.commit([(b"ZADD", b"jobs:scheduled", now, b"x"),
                    (b"ZADD", b"emq:{a{b}:scheduled", now, b"x"),
                    (b"HSET", b"emq:{h}:scheduled", b"f", b"v")])
    assert r.hk.promotion.earliest == {}
    r.commit([(b"ZADD", K.scheduled, now + 10_000, b"1", now + 5000, b"2")])
    assert r.hk.promotion.earliest == {b"q": now + 5000}
    r.commit([(b"ZADD", K.scheduled, b"%d.5" % (now + 3000), b"3")])  # a client's score
    assert r.hk.promotion.earliest == {b"q": now + 3001}
    r.commit([(b"ZADD", K.scheduled, now + 4000, b"4")])  # later than known: no entry
    assert r.hk.promotion.heap == [(now + 3001, b"q"), (now + 5000, b"q")]


async def test_queues_known_at_start_are_looked_at(rig: Any) -> None:
    now = clock.now_ms()
    r = rig(preload=[(b"ZADD", b"emq:queues", 1, b"q"), (b"ZADD", K.scheduled, now - 1000, b"7"),
                     (b"ZADD", K.active, now - 1000, b"8")])
    await until(lambda: r.zset(K.pending) == [b"7", b"8"])


# --- the stall sweep ------------------------------------------------------------------
async def test_an_expired_lease_is_swept_without_any_client(rig: Any) -> None:
    r = rig(stalled_interval=50)
    deadline = clock.now_ms() + 30
    r.commit([(b"HSET", K.job(b"1"), b"state", b"active"),
                    (b"ZADD", K.active, deadline, b"1")])
    await until(lambda: r.zset(K.pending) == [b"1"])
    assert clock.now_ms() - deadline < 500
    assert r.hk.counters.stall_recovered == 1


async def test_an_extended_lease_is_not_swept_before_its_new_deadline(rig: Any) -> None:
    r = rig(stalled_interval=50)
    now = clock.now_ms()
    r.commit([(b"ZADD", K.active, now + 20, b"1")])
    r.commit([(b"ZADD", K.active, now + 150, b"1")])  # EXTEND
    await asyncio.sleep(0.08)  # past the first deadline: one empty pass, then the new one
    assert r.zset(K.active) == [b"1"]
    assert r.hk.sweep.earliest == {b"q": now + 150}
    await until(lambda: r.zset(K.pending) == [b"1"])


async def test_a_sink_that_could_not_write_holds_the_sweep_while_it_asks(rig: Any) -> None:
    """A remote store that lost time (a cluster's failover) asks the sweep to wait: an
    expired lease stays until the sink no longer asks, and is then swept."""
    r = rig(stalled_interval=50)
    asked: list[bytes] = []
    waits = {b"q": 150}

    def sweep_delay_ms(queue: bytes) -> int:
        asked.append(queue)
        return waits.get(queue, 0)

    r.state.sink.sweep_delay_ms = sweep_delay_ms
    start = clock.now_ms()
    r.commit([(b"ZADD", K.active, start + 10, b"1")])
    await asyncio.sleep(0.1)
    assert r.zset(K.active) == [b"1"] and asked  # due, asked, and held
    waits.clear()
    await until(lambda: r.zset(K.pending) == [b"1"])
    assert clock.now_ms() - start >= 150  # not before the wait it was given ran out
    assert r.hk.counters.stall_recovered == 1


async def test_stalled_interval_zero_turns_the_sweep_off(rig: Any) -> None:
    r = rig(stalled_interval=0)
    r.commit([(b"ZADD", K.active, clock.now_ms() - 1, b"1")])
    await asyncio.sleep(0.05)
    assert r.zset(K.active) == [b"1"] and r.hk.sweep.heap == []


async def test_a_corrupt_row_is_logged_once_counted_and_retried_each_interval(
    rig: Any, caplog: Any
) -> None:
    r = rig(stalled_interval=100)
    now = clock.now_ms()
    r.commit([(b"HSET", K.job(b"bad"), b"stalled", b"bad")])
    with caplog.at_level(logging.WARNING, logger="emqd"):
        r.commit([(b"ZADD", K.active, now - 30, b"a", now - 20, b"bad", now - 10, b"c")])
        await until(lambda: r.hk.counters.refused >= 1)
        for i in range(20):  # claims on the same queue do not bring the retry sooner
            r.commit([(b"ZADD", K.active, clock.now_ms() - 1, b"late%d" % i)])
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)
    refused = r.hk.counters.refused
    assert 2 <= refused <= 8  # about one attempt per 100 ms interval: never a spin
    assert r.zset(K.pending) == [b"a"]  # the members before the corrupt one are recovered
    assert r.zset(K.active)[:2] == [b"bad", b"c"]
    warnings = [rec for rec in caplog.records if "refused" in rec.getMessage()]
    assert len(warnings) == 1
    assert "'q'" in warnings[0].getMessage() and "'bad'" in warnings[0].getMessage()
    assert "ERR hash value is not an integer" in r.hk.counters.last_refusal
    info = info_section(r.state, "stats", clock.now_ms())
    assert info["housekeeping_refused"] == refused
    r.commit([(b"HDEL", K.job(b"bad"), b"stalled")])  # an operator repairs the row
    await until(lambda: r.zset(K.active) == [], timeout=1.0)
    assert r.zset(K.pending)[:3] == [b"a", b"bad", b"c"] and len(r.zset(K.pending)) == 23


# --- retention --------------------------------------------------------------------------
async def test_lowering_a_setting_trims_in_slices(rig: Any) -> None:
    r = rig()
    r.commit([(b"ZADD", K.completed, *[x for i in range(230) for x in (i, b"%d" % i)])])
    r.commit([(b"HSET", K.config, b"keep_completed", b"5")])
    await until(lambda: len(r.zset(K.completed)) == 5)
    trims = [record for record in r.records if record[0][0] == b"ZREM"]
    assert [len(plan[0]) - 2 for plan in trims] == [100, 100, 25]
    assert r.zset(K.completed) == [b"225", b"226", b"227", b"228", b"229"]
    assert r.hk.counters.trimmed == 225
