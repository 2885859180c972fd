"""EMQ.METRICS (emqd/verbs/metrics.py), what the history sees (emqd/commit/history.py),
housekeeping's close of a minute, and the history over the wire: kept across a restart,
in a file Redis loads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from emqd import errors
from emqd.commit.events import CLAIMED, COMPLETED, DEAD
from emqd.commit.history import History
from emqd.config import Config
from emqd.core import Core, Session
from emqd.dispatch import execute
from emqd.layout import queue_keys
from emqd.rules import minutes
from emqd.rules.minutes import Minute
from emqd.serve.housekeeping import Housekeeping
from emqd.verbs import metrics
from tests.persist.test_redis_loads import as_redis_loads_it
from tests.support import redis_server_path, start_emqd
from tests.verbs.planner import NOW, drive, keyspace

K = queue_keys(b"q")
M0 = NOW // 60_000 // 60 * 60  # the first minute of NOW's hour


def stored(*found: Minute) -> dict:
    """A queue's history hash holding `found` (all in M0's hour) as `cur`."""
    records = b"".join(minutes.record(one) for one in found)
    return {"emq:{q}:minutes": {"cur": minutes.block(M0 // 60, records)}}


def test_the_reply_lists_each_minute_with_its_counts_and_percentiles() -> None:
    space = keyspace(**stored(Minute(M0 + 1, 5, 2, 1, (3, 20, 30), None),
                              Minute(M0 + 2, 0, 0, 0, None, (16, 24, 40))))
    reply = drive(metrics, ["emq.metrics", "q"], space, now=(M0 + 3) * 60_000)
    assert reply == [
        {b"minute": (M0 + 1) * 60_000, b"completed": 5, b"failures": 2, b"dead": 1,
         b"wait_p50": 3, b"wait_p95": minutes.value(20), b"wait_p99": minutes.value(30),
         b"run_p50": None, b"run_p95": None, b"run_p99": None},
        {b"minute": (M0 + 2) * 60_000, b"completed": 0, b"failures": 0, b"dead": 0,
         b"wait_p50": None, b"wait_p95": None, b"wait_p99": None,
         b"run_p50": minutes.value(16), b"run_p95": minutes.value(24),
         b"run_p99": minutes.value(40)},
    ]
    later = drive(metrics, ["emq.metrics", "q", "FROM", (M0 + 2) * 60_000], space)
    assert [entry[b"minute"] for entry in later] == [(M0 + 2) * 60_000]
    earlier = drive(metrics, ["emq.metrics", "q", "TO", (M0 + 1) * 60_000], space)
    assert [entry[b"minute"] for entry in earlier] == [(M0 + 1) * 60_000]
    assert drive(metrics, ["emq.metrics", "empty"], space) == []


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["FROM", "-1"], errors.must_be_non_negative("FROM")),
        ({}, ["TO", "x"], errors.must_be_non_negative("TO")),
        ({}, ["FROM"], errors.SYNTAX),
        ({}, ["SINCE", "1"], errors.SYNTAX),
        ({"emq:{q}:minutes": {"cur": "\x05\x09ab"}}, [], errors.CORRUPT_HISTORY),
        ({"emq:{q}:minutes": [("x", 1)]}, [], errors.WRONGTYPE),
    ],
)
def test_refusals(data: dict, argv: list, error: errors.ReplyError) -> None:
    assert drive(metrics, ["emq.metrics", "q", *argv], keyspace(**data)) == error


# --- what the history sees ---------------------------------------------------------------
def test_each_event_goes_to_its_queues_minute_and_ended_minutes_are_handed_over() -> None:
    history = History()
    ts = M0 * 60_000
    history.listen([(CLAIMED, b"q", b"1", ts, {"token": b"1", "wait_ms": 40}),
                    (COMPLETED, b"q", b"1", ts + 5, {"duration_ms": 1000}),
                    (DEAD, b"r", b"9", ts + 5, {"error": b"x"})])
    assert history.ended(M0) == []  # the minute M0 has not ended
    history.listen([(CLAIMED, b"q", b"2", ts + 60_000, {"token": b"1", "wait_ms": 7})])
    ended = history.ended(M0 + 1)  # q's, ended by its next minute's event, then r's
    assert [(one.queue, one.minute) for one in ended] == [(b"q", M0), (b"r", M0)]
    assert ended[0].wait == {minutes.code(40): 1} and ended[0].run == {minutes.code(1000): 1}
    assert ended[1].wait == {} and ended[1].run == {}  # a death: its queue is closed
    assert [one.minute for one in history.ended(M0 + 2)] == [M0 + 1]
    history.listen([(CLAIMED, b"q", b"3", ts + 120_000, {"token": b"1", "wait_ms": 7}),
                    (CLAIMED, b"q", b"4", ts + 180_000, {"token": b"1", "wait_ms": 7}),
                    (CLAIMED, b"r", b"5", ts + 180_000, {"token": b"1", "wait_ms": 7})])
    assert [one.minute for one in history.taken(b"q")] == [M0 + 2, M0 + 3]  # let go: all of q's
    assert history.taken(b"q") == [] and [one.queue for one in history.ended(M0 + 9)] == [b"r"]
    history.note_base(b"q", (1, 2, 3))
    assert history.base_of(b"q") == (1, 2, 3) and history.base_of(b"new") == (0, 0, 0)


def test_housekeeping_closes_what_the_verbs_did_into_the_history() -> None:
    """Through the dispatcher and the commit path's listener, as in the server: three jobs,
    two completed and one dead; shutdown's close_minutes keeps the open minute."""
    state = Core(Config(appendonly=False, stalled_interval=0))
    state.commit.listen(state.history.listen)
    keeper = Housekeeping(state, wake=lambda: None)
    session = Session(state)

    def run(*argv: object) -> object:
        return execute(session, [str(a).encode() for a in argv])

    for payload in ("a", "b", "c"):
        run("EMQ.ADD", "q", payload)
    for _ in range(2):
        job_id, token, _, _ = run("EMQ.CLAIM", "q", 30_000)
        run("EMQ.COMPLETE", "q", job_id.decode(), token.decode())
    job_id, token, _, _ = run("EMQ.CLAIM", "q", 30_000)
    run("EMQ.FAIL", "q", job_id.decode(), token.decode(), "MAXATTEMPTS", 1)
    keeper.close_minutes(b"other")  # a queue let go in cluster mode: only its minutes
    assert run("EMQ.METRICS", "q") == []
    keeper.close_minutes()
    entries = run("EMQ.METRICS", "q")
    assert [sum(entry[name] for entry in entries) for name in (b"completed", b"failures",
                                                             b"dead")] == [2, 1, 1]
    assert all(entry[b"wait_p50"] is not None for entry in entries)
    assert any(entry[b"run_p99"] is not None for entry in entries)
    assert state.history.base_of(b"q") == (2, 1, 1)  # the next minute starts from here
    assert state.history.ended(10**12) == []  # every minute was closed, once


# --- over the wire --------------------------------------------------------------------------
def _load(client: redis.Redis, completed: int, dead: int) -> None:
    for i in range(completed + dead):
        client.execute_command("EMQ.ADD", "q", f"job {i}")
    for i in range(completed + dead):
        job_id, token, _, _ = client.execute_command("EMQ.CLAIM", "q", 30_000)
        if i < completed:
            client.execute_command("EMQ.COMPLETE", "q", job_id, token)
        else:
            client.execute_command("EMQ.FAIL", "q", job_id, token, "MAXATTEMPTS", 1)


def _totals(entries: list) -> list[int]:
    return [sum(entry[name] for entry in entries) for name in (b"completed", b"failures",
                                                             b"dead")]


def test_the_history_is_kept_across_a_restart_and_counted_once(tmp_path: Path) -> None:
    """A SIGTERM closes the open minute into the log; the restarted server answers it, and
    its own minutes count from the counters the log gave it."""
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as client:
            _load(client, 7, 2)
        server.stop()
        server.restart()
        with redis.Redis(port=server.port) as client:
            assert _totals(client.execute_command("EMQ.METRICS", "q")) == [7, 2, 2]
            _load(client, 3, 0)
        server.stop()
        server.restart()
        with redis.Redis(port=server.port) as client:
            entries = client.execute_command("EMQ.METRICS", "q")
            assert _totals(entries) == [10, 2, 2]
            assert all(entry[b"wait_p99"] is not None for entry in entries)
            assert client.hkeys("emq:{q}:minutes") == [b"cur"]  # one hour so far
    finally:
        server.stop()


@pytest.mark.skipif(redis_server_path() is None, reason="redis-server is not installed")
def test_redis_loads_the_file_with_the_history_as_its_own(tmp_path: Path) -> None:
    """The history is plain HSETs in the log: Redis 7 loads emqd's file (as
    tests/persist/test_redis_loads.py hands it one) and holds the same hash."""
    data = tmp_path / "emqd"
    data.mkdir()
    server = start_emqd("--appendonly", "yes", dir=str(data))
    try:
        with redis.Redis(port=server.port) as client:
            _load(client, 4, 1)
    finally:
        server.stop()
    server.restart()
    try:
        with redis.Redis(port=server.port) as client:
            ours = client.hgetall("emq:{q}:minutes")
            assert _totals(client.execute_command("EMQ.METRICS", "q")) == [4, 1, 1]
    finally:
        server.stop()
    assert as_redis_loads_it(data / "emqd.aof", tmp_path / "redis")[b"emq:{q}:minutes"] == (
        "hash", ours)


def test_the_minute_timer_closes_every_ended_minute_a_slice_a_loop_turn() -> None:
    """150 queues that had a claim in an ended minute: the timer's callback closes 100 in its
    turn and the rest at the next, and arms itself for the next minute's end."""
    state = Core(Config(appendonly=False, stalled_interval=0))
    keeper = Housekeeping(state, wake=lambda: None)
    queues = [b"q%d" % i for i in range(150)]
    state.history.listen([(CLAIMED, queue, b"1", NOW, {"token": b"1", "wait_ms": 250})
                          for queue in queues])

    async def turns() -> list[int]:
        loop = asyncio.get_running_loop()
        keeper._minute_ended(loop)
        closed = [sum(1 for queue in queues if state.keyspace.hash(queue_keys(queue).minutes))]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        closed.append(sum(1 for queue in queues if state.keyspace.hash(queue_keys(queue).minutes)))
        assert keeper._minute_timer is not None  # the next minute's close is armed
        keeper.stop()
        return closed

    assert asyncio.run(turns()) == [100, 150]
    reply = execute(Session(state), [b"EMQ.METRICS", b"q7"])
    assert [(entry[b"minute"], entry[b"wait_p50"]) for entry in reply] == [
        (NOW // 60_000 * 60_000, minutes.value(minutes.code(250)))]
