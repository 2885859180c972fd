"""EMQ.ADD: the planner directly, then over the wire."""

from __future__ import annotations

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.commit.plan import BIG_VALUE, Plan
from emqd.config import Config
from emqd.layout import QUEUES, queue_keys
from emqd.verbs import add
from tests.verbs.planner import (
    NOW,
    RUN_ID,
    commit,
    drive,
    effects,
    hash_of,
    keyspace,
    set_field,
)

P = b"emq:{q}:"


def test_first_add_writes_row_score_seq_and_queue() -> None:
    space = keyspace()
    result = drive(add, ["emq.add", "q", "hello"], space, now=NOW)
    assert effects(result) == effects(Plan(
        [
            (b"HSET", P + b"job:1", b"state", b"pending", b"payload", b"hello",
             b"created_ms", b"%d" % NOW),
            (b"ZADD", P + b"pending", 1, b"1"),
            (b"HSET", P + b"meta", b"seq", b"1", b"added", b"1"),
            (b"ZADD", b"emq:queues", NOW, b"q"),
        ],
        b"1",
    ))


def test_priority_band_and_next_seq() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "41"}, "emq:queues": [("q", 1)]})
    plan = drive(add, ["emq.add", "q", "x", "PRIORITY", "-2", "MAXATTEMPTS", "5",
                       "BACKOFF", "exp:10:100"], space)
    assert plan.reply == b"42"
    assert plan.ops[0][-6:] == (b"priority", b"-2", b"max_attempts", b"5", b"backoff",
                                b"exp:10:100")
    assert plan.ops[1] == (b"ZADD", P + b"pending", -2 * 2**40 + 42, b"42")
    assert len(plan.ops) == 3  # the queue is already known


def test_skips_ids_a_client_created() -> None:
    space = keyspace(**{"emq:{q}:job:1": {"state": "pending"}, "emq:{q}:job:2": {"x": "y"}})
    plan = drive(add, ["emq.add", "q", "x"], space)
    assert plan.reply == b"3"
    assert (b"HSET", P + b"meta", b"seq", b"3", b"added", b"1") in plan.ops


@pytest.mark.parametrize(("delay", "state_key"), [("0", b"pending"), ("1", b"scheduled")])
def test_delay_zero_is_due_now(delay: str, state_key: bytes) -> None:
    space = keyspace()
    plan = drive(add, ["emq.add", "q", "x", "DELAY", delay], space)
    assert plan.ops[1][1] == P + state_key
    commit(space, plan)
    assert hash_of(space, P + b"job:1")[b"state"] == state_key


def test_at_in_the_past_is_pending_and_future_is_scheduled_at_that_time() -> None:
    assert drive(add, ["emq.add", "q", "x", "AT", NOW], keyspace()).ops[1][1] == P + b"pending"
    plan = drive(add, ["emq.add", "q", "x", "AT", NOW + 5], keyspace())
    assert plan.ops[1] == (b"ZADD", P + b"scheduled", NOW + 5, b"1")


def test_existing_id_is_idempotent() -> None:
    space = keyspace(**{"emq:{q}:job:abc": {"state": "completed"}})
    planned = drive(add, ["emq.add", "q", "x", "ID", "abc"], space)
    assert effects(planned) == effects(Plan([], b"abc"))


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["emq.add", "q{x", "p"], errors.INVALID_QUEUE),
        (["emq.add", "", "p"], errors.INVALID_QUEUE),
        (["emq.add", "q" * 257, "p"], errors.INVALID_QUEUE),
        (["emq.add", "q", "p", "ID", ""], errors.INVALID_ID),
        (["emq.add", "q", "p", "DELAY", "1", "AT", "2"], errors.SYNTAX),
        (["emq.add", "q", "p", "DELAY"], errors.SYNTAX),
        (["emq.add", "q", "p", "NOPE", "1"], errors.SYNTAX),
        (["emq.add", "q", "p", "ID", "a", "ID", "b"], errors.SYNTAX),
        (["emq.add", "q", "p", "DELAY", "-1"], errors.must_be_non_negative("DELAY")),
        (["emq.add", "q", "p", "AT", "01"], errors.must_be_non_negative("AT")),
        (["emq.add", "q", "p", "PRIORITY", "1001"], errors.PRIORITY_RANGE),
        (["emq.add", "q", "p", "PRIORITY", "+1"], errors.PRIORITY_NOT_INTEGER),
        (["emq.add", "q", "p", "PRIORITY", "abc"], errors.PRIORITY_NOT_INTEGER),
        (["emq.add", "q", "p", "MAXATTEMPTS", "0"], errors.must_be_positive("MAXATTEMPTS")),
        (["emq.add", "q", "p", "BACKOFF", "exp:"], errors.INVALID_BACKOFF),
        (["emq.add", "q", "p", "BACKOFF", "linear:5"], errors.INVALID_BACKOFF),
        (["emq.add", "q", "p", "GROUP", ""], errors.INVALID_GROUP),
        (["emq.add", "q", "p", "GROUP", "a{b"], errors.INVALID_GROUP),
        (["emq.add", "q", "p", "GROUP", "}"], errors.INVALID_GROUP),
        (["emq.add", "q", "p", "GROUP", "g" * 257], errors.INVALID_GROUP),
    ],
)
def test_refusals(argv: list[str], error: errors.ReplyError) -> None:
    assert drive(add, argv, keyspace()) == error


def test_payload_over_max_payload() -> None:
    result = drive(add, ["emq.add", "q", "x" * 11], keyspace(), config=Config(max_payload=10))
    assert result == errors.PAYLOAD_TOO_BIG


def test_corrupt_seq_refuses_with_hincrby_text() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "01"}})
    assert drive(add, ["emq.add", "q", "x"], space) == errors.HASH_NOT_INTEGER
    space = keyspace(**{"emq:{q}:meta": {"seq": str(2**63 - 1)}})
    assert drive(add, ["emq.add", "q", "x"], space) == errors.OVERFLOW


def test_wrongtype_meta_refuses() -> None:
    space = keyspace(**{"emq:{q}:meta": [("a", 1)]})
    assert drive(add, ["emq.add", "q", "x"], space) == errors.WRONGTYPE


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.ADD", "mail", "hello") == b"1"
    assert r.execute_command("emq.add", "mail", "later", "DELAY", "60000") == b"2"
    assert r.hgetall("emq:{mail}:job:1")[b"payload"] == b"hello"
    assert r.type("emq:{mail}:pending") == b"zset"
    assert r.type("emq:{mail}:scheduled") == b"zset"
    assert r.hget("emq:{mail}:job:2", "state") == b"scheduled"
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'emq.add'"):
        r.execute_command("EMQ.ADD", "mail")
    before = r.hgetall("emq:{mail}:meta")
    with pytest.raises(redis.ResponseError, match="PRIORITY must be between"):
        r.execute_command("EMQ.ADD", "mail", "x", "PRIORITY", "5000")
    assert r.hgetall("emq:{mail}:meta") == before


@pytest.mark.parametrize(("key", "argv"), [("emq:{q}:pending", []),
                                           ("emq:{q}:scheduled", ["DELAY", "10"])])
def test_wrongtype_target_set_refuses_before_writing(key: str, argv: list) -> None:
    # Without the check, the plan's HSET of the row applied and its ZADD failed halfway.
    space = keyspace(**{key: {"not": "a zset"}})
    assert drive(add, ["emq.add", "q", "x", *argv], space) == errors.WRONGTYPE
    assert drive(add, ["emq.add", "q", "x", *(["DELAY", "10"] if not argv else [])],
                 space).reply == b"1"


def test_without_a_log_ids_start_after_the_process_base() -> None:
    """Issue 12, finding 9: a worker of an earlier process presenting (1, token 1) must not
    complete a new job 1. A queue with no meta.seq starts after `id_base`; one that has a
    seq (a log was loaded) goes on from it."""
    config = Config(id_base=60_000_000_000)
    result = drive(add, ["emq.add", "q", "p"], keyspace(), config=config)
    assert result.reply == b"60000000001"
    going_on = keyspace(**{"emq:{q}:meta": {"seq": "7"}})
    assert drive(add, ["emq.add", "q", "p"], going_on, config=config).reply == b"8"


# --- the PLAIN Shape against the general rule it stands for --------------------------
@settings(max_examples=150, deadline=None, database=None)
@given(jobs=st.integers(0, 3), seq=st.none() | st.integers(0, 2**40),
       added=st.none() | st.integers(0, 2**40), taken=st.integers(0, 3),
       payload=st.binary(max_size=64), longest=st.booleans(),
       now=st.integers(0, 2**50))
def test_the_plain_shape_plans_what_the_general_rule_plans(
        jobs: int, seq: int | None, added: int | None, taken: int, payload: bytes,
        longest: bool, now: int) -> None:
    """ADD without options into a registered queue without lanes (PLAIN, add.plan's fast
    path) against add.general (rules/enqueue.py) on the same keyspace: the same ops as the
    log holds them, reply, events and due. The counters at any value a queue reaches (or
    absent), rows a client made where the next ids would go (skipped by both), and the
    longest payload a template copies."""
    space = keyspace()
    for i in range(jobs):
        commit(space, drive(add, ["emq.add", "q", f"p{i}"], space))
    assert (space.zset(QUEUES) is not None) == (jobs > 0)  # the first add registers q
    meta = queue_keys(b"q").meta
    for name, value in ((add.SEQ, seq), (add.ADDED, added)):
        if value is not None:
            set_field(space, meta, name, b"%d" % value)
    next_id = (seq if seq is not None else jobs) + 1
    for n in range(next_id, next_id + taken):
        set_field(space, queue_keys(b"q").job(b"%d" % n), b"payload", b"a client's")
    if longest:
        payload = b"x" * (BIG_VALUE - 1)
    args = add.parse([b"emq.add", b"q", payload], Config())
    fast = add.plan(args, space, now, RUN_ID)
    general = add.general(args, space, now, None)
    assert fast.shape is (add.PLAIN if jobs else None)  # a queue not registered: general
    assert effects(fast) == effects(general)
    assert (fast.events, fast.due) == (general.events, general.due)
