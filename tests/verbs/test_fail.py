"""EMQ.FAIL: decide_fail's steps, the cap on `failures`, backoff, dead letters; over the wire."""

from __future__ import annotations

import pytest
import redis
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.rules import job
from emqd.rules import settings as queue_settings
from emqd.verbs import fail, requeue
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    claim_one,
    members,
    row,
    run,
    snapshot,
    wire_error,
    wire_snapshot,
)
from tests.verbs.planner import NOW, RUN_ID, drive, effects, hash_of, held, keyspace

LIVE = {"state": "active", "attempts": "1", "payload": "x", "claimed_ms": "1"}


# --- the seed's falsifiers: the cap is on failures, not attempts -----------------------
@pytest.mark.parametrize(
    ("token", "cap", "fields", "reply"),
    [
        ("2", "2", {"attempts": "2"}, [b"scheduled", 1]),  # claim, requeue, claim: retry
        ("1", "2", {"failures": "1"}, [b"dead", 2]),  # one failure on record dies at the second
        ("1", "1", {}, [b"dead", 1]),  # max 1 dies at the first failure
        ("1", "3", {"failures": "5"}, [b"dead", 6]),  # over the cap
    ],
)
def test_the_cap_is_on_failures_not_attempts(token: str, cap: str, fields: dict,
                                             reply: list) -> None:
    space = held({**LIVE, **fields})
    assert run(fail, ["emq.fail", "q", "1", token, "MAXATTEMPTS", cap], space) == reply
    assert row(space, "1")[b"failures"] == b"%d" % reply[1]
    assert row(space, "1")[b"attempts"] == fields.get("attempts", "1").encode()
    check_invariant(space)


def test_claim_requeue_claim_fail_with_max_two_is_scheduled() -> None:
    space = keyspace()
    add_jobs(space, 1)
    claim_one(space)
    assert run(requeue, ["emq.requeue", "q", "1", "1"], space) == "OK"
    job_id, token, _, failures = claim_one(space)
    assert (job_id, token, failures) == (b"1", b"2", 0)
    assert run(fail, ["emq.fail", "q", "1", "2", "MAXATTEMPTS", "2"], space) == [b"scheduled", 1]
    check_invariant(space)


def test_dead_plan() -> None:
    result = drive(fail, ["emq.fail", "q", "1", "1", "ERROR", "boom", "MAXATTEMPTS", "1"],
                   held(dict(LIVE)))
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"last_error", b"boom", b"failures", b"1",
             b"state", b"dead", b"finished_ms", b"%d" % NOW),
            (b"ZADD", P + b"dead", NOW, b"1"),
            (b"HSET", P + b"metrics:failed", b"count", b"1"),
            (b"HSET", P + b"metrics", b"failed", b"1"),
        ],
        [b"dead", 1],
    ))


def test_retry_plan_uses_the_queue_backoff_by_default() -> None:
    result = drive(fail, ["emq.fail", "q", "1", "1"], held(dict(LIVE)))
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"last_error", b"", b"failures", b"1",
             b"state", b"scheduled"),
            (b"ZADD", P + b"scheduled", NOW + 1000, b"1"),  # fixed:1000, the server default
            (b"HSET", P + b"metrics", b"failed", b"1", b"retried", b"1"),
        ],
        [b"scheduled", 1],
    ))


@pytest.mark.parametrize(
    ("row_extra", "config", "argv", "cap_reply"),
    [
        ({}, {}, [], [b"scheduled", 1]),  # server default 3
        ({"max_attempts": "1"}, {}, [], [b"dead", 1]),  # the row's own
        ({"max_attempts": "1"}, {}, ["MAXATTEMPTS", "2"], [b"scheduled", 1]),  # the argument wins
        ({}, {"max_attempts": "1"}, [], [b"dead", 1]),  # the queue's
        ({"max_attempts": "5"}, {"max_attempts": "1"}, [], [b"scheduled", 1]),  # row over queue
    ],
)
def test_cap_precedence(row_extra: dict, config: dict, argv: list, cap_reply: list) -> None:
    space = held({**LIVE, **row_extra}, **({"emq:{q}:config": config} if config else {}))
    assert run(fail, ["emq.fail", "q", "1", "1", *argv], space) == cap_reply


@pytest.mark.parametrize(
    ("row_extra", "config", "argv", "failures", "delay"),
    [
        ({}, {}, ["BACKOFF", "0"], "0", 0),
        ({"backoff": "exp:100"}, {}, [], "2", 400),  # the third failure: 100 * 2^2
        ({"backoff": "exp:100:250"}, {}, [], "2", 250),
        ({"backoff": "exp:100"}, {}, ["BACKOFF", "7"], "2", 7),
        ({}, {"backoff": "50"}, [], "0", 50),
        ({"backoff": "fixed:9"}, {"backoff": "50"}, [], "0", 9),
    ],
)
def test_backoff_precedence(row_extra: dict, config: dict, argv: list, failures: str,
                            delay: int) -> None:
    space = held({**LIVE, "failures": failures, **row_extra},
                 **({"emq:{q}:config": config} if config else {}))
    result = drive(fail, ["emq.fail", "q", "1", "1", "MAXATTEMPTS", "10", *argv], space)
    zadd = result.ops[-2]  # the score as a number: a Shape's ops carry it as bytes
    assert zadd[:2] == (b"ZADD", P + b"scheduled") and int(zadd[2]) == NOW + delay
    assert zadd[3:] == (b"1",)


def test_server_flags_give_the_queue_defaults() -> None:
    config = Config(max_attempts=1)
    assert drive(fail, ["emq.fail", "q", "1", "1"], held(dict(LIVE)), config=config).reply == [
        b"dead", 1]


def test_dead_letter_trims_dead_and_counts_trimmed() -> None:
    space = held(dict(LIVE), **{"emq:{q}:config": {"keep_dead": "1"},
                                "emq:{q}:dead": [("a", 1), ("b", 2)],
                                "emq:{q}:job:a": {"state": "dead"},
                                "emq:{q}:job:b": {"state": "dead"},
                                "emq:{q}:metrics:failed": {"count": "2", "trimmed": "4"}})
    assert run(fail, ["emq.fail", "q", "1", "1", "MAXATTEMPTS", "1"], space) == [b"dead", 1]
    assert [m for m, _ in members(space, b"dead")] == [b"1"]
    assert row(space, "a") is None and row(space, "b") is None
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"3", b"trimmed": b"6"}
    check_invariant(space)


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1", "1"], errors.STALE_GONE),
        ({"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:pending": [("1", 1)]}, ["1", "1"],
         errors.STALE_GONE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", "2"], errors.STALE_TOKEN),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)]}, ["1", " 1"],
         errors.STALE_TOKEN),
        ({"emq:{q}:job:1": {**LIVE, "state": "scheduled"}, "emq:{q}:scheduled": [("1", 1)]},
         ["1", "1"], errors.STALE_NOT_ACTIVE),
        ({"emq:{q}:job:1": {**LIVE, "failures": "x"}, "emq:{q}:active": [("1", 1)]}, ["1", "1"],
         errors.HASH_NOT_INTEGER),
        ({"emq:{q}:job:1": {**LIVE, "failures": str(2**63 - 1)}, "emq:{q}:active": [("1", 1)]},
         ["1", "1"], errors.OVERFLOW),
        ({"emq:{q}:job:1": {**LIVE, "max_attempts": "0"}, "emq:{q}:active": [("1", 1)]},
         ["1", "1"], errors.corrupt_job_field(b"max_attempts")),
        ({"emq:{q}:job:1": {**LIVE, "backoff": "soon"}, "emq:{q}:active": [("1", 1)]},
         ["1", "1"], errors.corrupt_job_field(b"backoff")),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:metrics:failed": {"count": "1x"}}, ["1", "1", "MAXATTEMPTS", "1"],
         errors.HASH_NOT_INTEGER),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:scheduled": {"x": "y"}}, ["1", "1"], errors.WRONGTYPE),
        ({"emq:{q}:job:1": LIVE, "emq:{q}:active": [("1", 1)],
          "emq:{q}:dead": {"x": "y"}}, ["1", "1", "MAXATTEMPTS", "1"], errors.WRONGTYPE),
        ({}, ["1", "1", "MAXATTEMPTS", "0"], errors.must_be_positive("MAXATTEMPTS")),
        ({}, ["1", "1", "BACKOFF", "-1"], errors.must_be_non_negative("BACKOFF")),
        ({}, ["1", "1", "ERROR"], errors.SYNTAX),
        ({}, ["1", "1", "ERROR", "a", "ERROR", "b"], errors.SYNTAX),
        ({}, ["", "1"], errors.INVALID_ID),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**data)
    before = snapshot(space)
    assert drive(fail, ["emq.fail", "q", *argv], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a", "MAXATTEMPTS", "2", "BACKOFF", "60000")
    r.execute_command("EMQ.ADD", "q", "b", "MAXATTEMPTS", "1")
    assert r.execute_command("EMQ.CLAIM", "q", "1000", "COUNT", "2")[1][:2] == [b"2", b"1"]
    assert r.execute_command("EMQ.FAIL", "q", "1", "1", "ERROR", "oops") == [b"scheduled", 1]
    assert r.hgetall("emq:{q}:job:1")[b"last_error"] == b"oops"
    assert r.hget("emq:{q}:job:1", "state") == b"scheduled"
    assert r.execute_command("EMQ.FAIL", "q", "2", "1") == [b"dead", 1]
    assert r.hget("emq:{q}:job:2", "state") == b"dead"
    assert r.hget("emq:{q}:job:2", "last_error") == b""
    assert r.hget("emq:{q}:metrics:failed", "count") == b"1"
    before = wire_snapshot(r)
    assert wire_error(r, "EMQ.FAIL", "q", "1", "1") == "EMQSTALE job not active"
    assert wire_error(r, "EMQ.FAIL", "q", "2", "1") == "EMQSTALE job not active"
    assert wire_error(r, "EMQ.FAIL", "q", "3", "1") == "EMQSTALE job gone"
    assert wire_error(r, "EMQ.FAIL", "q", "1", "1", "BACKOFF", "x") == (
        "BACKOFF must be a non-negative integer")
    assert wire_error(r, "EMQ.FAIL", "q", "1") == (
        "wrong number of arguments for 'emq.fail' command")
    assert wire_snapshot(r) == before


def test_claim_requeue_claim_fail_with_max_two_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a", "MAXATTEMPTS", "2", "BACKOFF", "60000")
    assert r.execute_command("EMQ.CLAIM", "q", "60000")[:2] == [b"1", b"1"]
    assert r.execute_command("EMQ.REQUEUE", "q", "1", "1") == b"OK"
    assert r.execute_command("EMQ.CLAIM", "q", "60000")[:2] == [b"1", b"2"]
    assert r.execute_command("EMQ.FAIL", "q", "1", "2") == [b"scheduled", 1]
    assert r.hget("emq:{q}:job:1", "attempts") == b"2"


# --- the RETRY Shape against the general path it stands for ---------------------------
RULES = ["0", "fixed:250", "exp:100", "exp:100:60000"]
maybe_rule = st.none() | st.sampled_from(RULES)
maybe_cap = st.none() | st.integers(1, 50)
maybe_count = st.none() | st.integers(0, 2**40)


@settings(max_examples=200, deadline=None, database=None)
@given(failures=st.none() | st.integers(0, 30), attempts=st.integers(1, 2**20),
       row_cap=maybe_cap, row_rule=maybe_rule, queue_cap=maybe_cap, queue_rule=maybe_rule,
       failed=maybe_count, retried=maybe_count, scheduled=st.integers(0, 3),
       error=st.none() | st.binary(max_size=24), cap=maybe_cap,
       backoff=st.none() | st.integers(0, 10**9), now=st.integers(0, 2**50))
def test_the_retry_shape_plans_what_the_general_path_plans(
        failures: int | None, attempts: int, row_cap: int | None, row_rule: str | None,
        queue_cap: int | None, queue_rule: str | None, failed: int | None,
        retried: int | None, scheduled: int, error: bytes | None, cap: int | None,
        backoff: int | None, now: int) -> None:
    """FAIL of a flat job that is retried (RETRY, fail.plan's fast path) against
    fail.general (the lanes' ledger, which has no slot to give back) on the same keyspace:
    the same ops as the log holds them, reply, events and due. The row's and the queue's
    caps and rules, the counters at any value (or absent), and FAIL's own options."""
    fields = {"state": "active", "attempts": attempts, "payload": "x", "claimed_ms": 1}
    fields |= {name: value for name, value in (("failures", failures), ("max_attempts", row_cap),
                                               ("backoff", row_rule)) if value is not None}
    extra: dict[str, object] = {"emq:{q}:scheduled": [(f"s{i}", i) for i in range(scheduled)]}
    config = {name: value for name, value in (("max_attempts", queue_cap),
                                              ("backoff", queue_rule)) if value is not None}
    metrics = {name: value for name, value in (("failed", failed), ("retried", retried))
               if value is not None}
    extra |= {key: value for key, value in (("emq:{q}:config", config),
                                            ("emq:{q}:metrics", metrics)) if value}
    space = held(fields, **extra)
    argv = ["emq.fail", "q", "1", attempts]
    argv += [word for token, value in (("ERROR", error), ("MAXATTEMPTS", cap),
                                       ("BACKOFF", backoff)) if value is not None
             for word in (token, value)]
    args = fail.parse([value if isinstance(value, bytes) else str(value).encode()
                       for value in argv], Config())
    fast = fail.plan(args, space, now, RUN_ID)
    row = job.held(space, args.keys, args.id, args.token)
    verdict = fail.decide(args, row, (failures or 0) + 1,
                          queue_settings.of_queue(space, args.keys, args.config), now)
    assume(isinstance(verdict, fail.Retry))  # a dead letter has no Shape
    general = fail.general(args, space, row, verdict,
                           queue_settings.of_queue(space, args.keys, args.config), now)
    assert fast.shape is fail.RETRY
    assert effects(fast) == effects(general)
    assert (fast.events, fast.due) == (general.events, general.due)
