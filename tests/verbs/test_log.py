"""EMQ.LOG and EMQ.LOGS: a job's numbered lines, the newest kept, fenced, read back; the
log removed with its row by retention and EMQ.REMOVE."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.rules import retention
from emqd.verbs import complete, log, logs, remove
from emqd.verbs.complete import SHAPES
from tests.support import start_emqd
from tests.verbs.jobs import P, members, run, snapshot, wire_error, wire_snapshot
from tests.verbs.planner import NOW, drive, effects, held, keyspace

LIVE = {"state": "active", "attempts": "1", "payload": "p", "claimed_ms": str(NOW - 5)}
LOG = P + b"log:1"


def lines_of(n: int, first: int = 1) -> list[tuple[str, int]]:
    return [(f"{i}:line {i}", i) for i in range(first, first + n)]


def test_the_first_line_is_number_one() -> None:
    space = held(LIVE)
    assert effects(drive(log, ["emq.log", "q", "1", "1", "hello"], space)) == effects(
        Plan([(b"ZADD", LOG, 1, b"1:hello")], 1))
    assert run(log, ["emq.log", "q", "1", "1", "hello"], space) == 1
    assert run(log, ["emq.log", "q", "1", "1", "hello"], space) == 2  # the same line again
    assert members(space, b"log:1") == [(b"1:hello", 1), (b"2:hello", 2)]


def test_the_newest_lines_are_kept() -> None:
    space = held(LIVE, **{"emq:{q}:config": {"keep_log_lines": "3"},
                          "emq:{q}:log:1": lines_of(3)})
    assert effects(drive(log, ["emq.log", "q", "1", "1", "four"], space)) == effects(
        Plan([(b"ZADD", LOG, 4, b"4:four"), (b"ZREM", LOG, b"1:line 1")], 3))


def test_a_lowered_setting_trims_the_excess_at_the_next_line() -> None:
    space = held(LIVE, **{"emq:{q}:config": {"keep_log_lines": "2"},
                          "emq:{q}:log:1": lines_of(5)})
    assert run(log, ["emq.log", "q", "1", "1", "six"], space) == 2
    assert members(space, b"log:1") == [(b"5:line 5", 5), (b"6:six", 6)]


def test_keep_zero_keeps_nothing() -> None:
    space = held(LIVE, **{"emq:{q}:config": {"keep_log_lines": "0"}})
    assert effects(drive(log, ["emq.log", "q", "1", "1", "x"], space)) == effects(Plan([], 0))
    space = held(LIVE, **{"emq:{q}:config": {"keep_log_lines": "0"},
                          "emq:{q}:log:1": lines_of(2)})
    assert effects(drive(log, ["emq.log", "q", "1", "1", "x"], space)) == effects(
        Plan([(b"DEL", LOG)], 0))


def test_the_row_is_not_written() -> None:
    result = drive(log, ["emq.log", "q", "1", "1", "x"], held(LIVE))
    assert [op[1] for op in result.ops] == [LOG] and result.events is None


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1", "1", "x"], errors.STALE_GONE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "2", "x"],
         errors.STALE_TOKEN),
        ({"emq:{q}:job:1": {**LIVE, "state": "completed"}, "emq:{q}:completed": [("1", 1)]},
         ["1", "1", "x"], errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "1", b"x" * 4097],
         log.LINE_TOO_LONG),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)], "emq:{q}:log:1": {"a": "b"}},
         ["1", "1", "x"], errors.WRONGTYPE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:log:1": [("1:a", 1), ("2:b", 2.5)]}, ["1", "1", "x"], errors.CORRUPT_JOB_LOG),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:log:1": [("x", 2 ** 53)]}, ["1", "1", "x"], errors.CORRUPT_JOB_LOG),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:config": {"keep_log_lines": "-1"}}, ["1", "1", "x"],
         errors.corrupt_setting(b"keep_log_lines")),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(log, ["emq.log", "q", *argv], space) == error
    assert snapshot(space) == before


# --- EMQ.LOGS ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], [b"line 3", b"line 4", b"line 5"]),
        (["START", "1"], [b"line 4", b"line 5"]),
        (["COUNT", "2"], [b"line 3", b"line 4"]),
        (["count", "1", "start", "2"], [b"line 5"]),
        (["START", "3"], []),
        (["START", "9", "COUNT", "9"], []),
    ],
)
def test_logs_reads_oldest_first(options: list, expected: list) -> None:
    space = held(LIVE, **{"emq:{q}:log:1": lines_of(3, first=3)})
    assert drive(logs, ["emq.logs", "q", "1", *options], space) == expected


@pytest.mark.parametrize(
    ("data", "options", "expected"),
    [
        ({"emq:{q}:job:1": LIVE}, [], []),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:log:1": [("by hand", 1), ("2:a:b", 2)]}, [],
         [b"by hand", b"a:b"]),  # a member without a number is shown whole
        ({}, [], errors.NO_SUCH_JOB),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:log:1": {"a": "b"}}, [], errors.WRONGTYPE),
        ({"emq:{q}:job:1": LIVE}, ["START", "-1"], errors.must_be_non_negative("START")),
        ({"emq:{q}:job:1": LIVE}, ["COUNT", "0"], errors.must_be_positive("COUNT")),
        ({"emq:{q}:job:1": LIVE}, ["COUNT"], errors.SYNTAX),
        ({"emq:{q}:job:1": LIVE}, ["LIMIT", "1"], errors.SYNTAX),
    ],
)
def test_logs_edges(data: dict, options: list, expected: Any) -> None:
    assert drive(logs, ["emq.logs", "q", "1", *options], keyspace(**data)) == expected


# --- the log goes with its row ---------------------------------------------------------
def test_retention_deletes_the_victims_logs_too() -> None:
    space = keyspace(**{
        "emq:{q}:completed": [("a", 1), ("b", 2), ("c", 3)],
        "emq:{q}:job:a": {"state": "completed"}, "emq:{q}:job:b": {"state": "completed"},
        "emq:{q}:job:c": {"state": "completed"}, "emq:{q}:log:b": lines_of(2),
        "emq:{q}:config": {"keep_completed": "1"},
    })
    assert retention.trim_ops(space, queue_keys(b"q"), "completed", 1) == [
        (b"ZREM", P + b"completed", b"a", b"b"),
        (b"DEL", P + b"job:a", P + b"job:b", P + b"log:b"),
    ]
    plan = retention.plan(retention.slice_args(b"q", Config()), space, NOW, b"")
    assert plan.reply == 2  # rows deleted, not keys
    space.apply(plan.ops)
    assert sorted(space.data) == [P + b"completed", P + b"config", P + b"job:c"]


def test_complete_trims_a_victim_with_its_log_off_the_fast_path() -> None:
    base = {"emq:{q}:config": {"keep_completed": "1"}, "emq:{q}:completed": [("old", 1)],
            "emq:{q}:job:old": {"state": "completed"}}
    argv = ["emq.complete", "q", "1", "1"]
    plain = drive(complete, argv, held(LIVE, **base))
    assert plain.shape is SHAPES[(False, True)]
    logged = drive(complete, argv, held(LIVE, **base, **{"emq:{q}:log:old": lines_of(1)}))
    assert logged.shape is None
    assert (b"DEL", P + b"job:old", P + b"log:old") in logged.ops
    space = held(LIVE, **base, **{"emq:{q}:log:old": lines_of(1), "emq:{q}:log:1": lines_of(2)})
    run(complete, argv, space)
    assert P + b"log:old" not in space.data and P + b"log:1" in space.data  # its own stays


def test_remove_deletes_the_log() -> None:
    space = keyspace(**{"emq:{q}:job:1": {"state": "dead"}, "emq:{q}:dead": [("1", 1)],
                        "emq:{q}:log:1": lines_of(2)})
    assert effects(drive(remove, ["emq.remove", "q", "1"], space)) == effects(Plan(
        [(b"DEL", P + b"job:1", LOG), (b"ZREM", P + b"dead", b"1")], 1))
    assert run(remove, ["emq.remove", "q", "1"], space) == 1
    assert space.data == {}


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.CONFIG", "q", "SET", "keep_log_lines", "2", "keep_completed", "0")
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.CLAIM", "q", "60000")
    assert [r.execute_command("EMQ.LOG", "q", "1", "1", f"step {i}") for i in (1, 2, 3)] == [
        1, 2, 2]
    assert r.execute_command("EMQ.LOGS", "q", "1") == [b"step 2", b"step 3"]
    assert r.zrange("emq:{q}:log:1", 0, -1, withscores=True) == [(b"2:step 2", 2.0),
                                                                 (b"3:step 3", 3.0)]
    before = wire_snapshot(r) | {"log": r.zrange("emq:{q}:log:1", 0, -1)}
    assert wire_error(r, "EMQ.LOG", "q", "1", "2", "x") == "EMQSTALE token mismatch"
    assert wire_error(r, "EMQ.LOG", "q", "1", "1", "x" * 4097) == "LINE exceeds 4096 bytes"
    assert wire_snapshot(r) | {"log": r.zrange("emq:{q}:log:1", 0, -1)} == before
    r.execute_command("EMQ.COMPLETE", "q", "1", "1")  # keep_completed 0: the row goes now
    assert r.exists("emq:{q}:job:1", "emq:{q}:log:1") == 0
    assert wire_error(r, "EMQ.LOGS", "q", "1") == "no such job"


def test_config_set_keep_log_lines_is_the_default_of_the_next_line() -> None:
    server = start_emqd()
    try:
        with redis.Redis(port=server.port) as client:
            client.execute_command("EMQ.ADD", "q", "a")
            client.execute_command("EMQ.CLAIM", "q", "60000")
            client.execute_command("EMQ.LOG", "q", "1", "1", "one")
            assert client.config_set("keep-log-lines", "1")
            assert client.config_get("keep-log-lines") == {"keep-log-lines": "1"}
            assert client.execute_command("EMQ.LOG", "q", "1", "1", "two") == 1
            assert client.execute_command("EMQ.CONFIG", "q", "GET", "keep_log_lines") == b"1"
            with pytest.raises(redis.ResponseError, match="keep-log-lines"):
                client.config_set("keep-log-lines", "-1")
            assert client.execute_command("EMQ.LOGS", "q", "1") == [b"two"]
    finally:
        server.stop()
