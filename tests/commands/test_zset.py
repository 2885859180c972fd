"""Sorted-set command planners, directly: plain resolved ops, refusals, and replay.

Replay: every op a command logs must rebuild the same keyspace when applied
to an empty store (what loading the append-only file does), including the
listpack-like compact flag and signed zeros, for a long random session.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from emqd import dispatch
from emqd.commit.plan import Plan
from emqd.compat.numbers import score_arg
from emqd.config import Config
from emqd.core import Core, Session
from emqd.errors import NOT_FLOAT, SCORE_NAN, SYNTAX, WRONGTYPE, ZADD_INCR_PAIRS, ReplyError
from emqd.store.keyspace import Keyspace
from tests.differential.generate import Generator, render, setup
from tests.support import RecordingLog, plain_value


@pytest.fixture
def session() -> Session:
    session = Session(Core(Config(appendonly=False)))
    dispatch.execute(session, [b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c"])
    dispatch.execute(session, [b"HSET", b"h", b"f", b"v"])
    return session


def plan_of(session: Session, *argv: bytes) -> Any:
    try:
        return dispatch.TABLE[argv[0].lower()].handler(session, list(argv))
    except ReplyError as error:
        return error


@pytest.mark.parametrize(
    "argv, ops, reply",
    [
        ((b"ZINCRBY", b"z", b"2", b"a"), [(b"ZADD", b"z", 3, b"a")], 3.0),
        ((b"ZINCRBY", b"z", b"0.5", b"a"), [(b"ZADD", b"z", 1.5, b"a")], 1.5),
        ((b"ZADD", b"z", b"INCR", b"-1", b"new"), [(b"ZADD", b"z", -1, b"new")], -1.0),
        ((b"ZADD", b"z", b"CH", b"1", b"a", b"5", b"a", b"1", b"d"),
         [(b"ZADD", b"z", 5, b"a", 1, b"d")], 2),
        ((b"ZADD", b"z", b"1", b"q", b"2", b"q"), [(b"ZADD", b"z", 1, b"q", 2, b"q")], 1),
        ((b"ZADD", b"z", b"GT", b"0", b"a"), [], 0),
        ((b"ZADD", b"z", b"NX", b"INCR", b"1", b"a"), [], None),
        ((b"ZADD", b"nokey", b"XX", b"1", b"a"), None, 0),
        ((b"ZADD", b"z", b"1e300", b"a"), [(b"ZADD", b"z", 1e300, b"a")], 0),
        ((b"ZADD", b"z", b"inf", b"a"), [(b"ZADD", b"z", math.inf, b"a")], 0),
        ((b"ZADD", b"z", b"-0", b"a"), [(b"ZADD", b"z", -0.0, b"a")], 0),
        ((b"ZPOPMIN", b"z", b"2"), [(b"ZREM", b"z", b"a", b"b")],
         [b"a", 1.0, b"b", 2.0]),
        ((b"ZPOPMAX", b"z"), [(b"ZREM", b"z", b"c")], [b"c", 3.0]),
        ((b"ZREMRANGEBYSCORE", b"z", b"(1", b"+inf"), [(b"ZREM", b"z", b"b", b"c")], 2),
        ((b"ZREMRANGEBYRANK", b"z", b"-1", b"-1"), [(b"ZREM", b"z", b"c")], 1),
        ((b"ZREMRANGEBYRANK", b"z", b"5", b"9"), None, 0),
        ((b"ZREM", b"z", b"a", b"a", b"x"), [(b"ZREM", b"z", b"a")], 1),
    ],
)
def test_writes_plan_plain_resolved_ops(session: Session, argv: tuple, ops: list | None,
                                        reply: Any) -> None:
    result = plan_of(session, *argv)
    if ops is None:
        assert result == reply
        return
    assert type(result) is Plan
    assert (result.ops, result.reply) == (ops, reply)
    for op in result.ops:  # exact scores travel as ints, others as floats
        for value in op[2::2] if op[0] == b"ZADD" else ():
            assert type(value) is type(score_arg(float(value)))


@pytest.mark.parametrize(
    "argv, error",
    [
        ((b"ZADD", b"z", b"INCR", b"1", b"a", b"2", b"b"), ZADD_INCR_PAIRS),
        ((b"ZADD", b"z", b"1", b"a", b"x", b"b"), NOT_FLOAT),  # no pair is added
        ((b"ZADD", b"z", b"1", b"a", b"2"), SYNTAX),
        ((b"ZADD", b"h", b"x", b"a"), NOT_FLOAT),
        ((b"ZADD", b"h", b"1", b"a"), WRONGTYPE),
        ((b"ZPOPMIN", b"h"), WRONGTYPE),
    ],
)
def test_refusals_write_nothing(session: Session, argv: tuple, error: ReplyError) -> None:
    before = list(session.core.keyspace.data[b"z"])
    assert dispatch.execute(session, list(argv)) == error
    assert list(session.core.keyspace.data[b"z"]) == before


def test_nan_from_incr_is_refused_before_any_write(session: Session) -> None:
    dispatch.execute(session, [b"ZADD", b"z", b"inf", b"a"])
    assert dispatch.execute(session, [b"ZINCRBY", b"z", b"-inf", b"a"]) == SCORE_NAN
    assert session.core.keyspace.zset(b"z").score(b"a") == math.inf


def test_popping_everything_removes_the_key(session: Session) -> None:
    dispatch.execute(session, [b"ZPOPMIN", b"z", b"10"])
    assert b"z" not in session.core.keyspace


def test_negative_zero_travels_as_a_float(session: Session) -> None:
    result = plan_of(session, b"ZADD", b"z", b"-0", b"n")
    (_, _, score, _), = result.ops
    assert type(score) is float and math.copysign(1.0, score) < 0


def snapshot(keyspace: Keyspace) -> dict:
    out: dict = {}
    for key, value in keyspace.data.items():
        zset = keyspace.zset(key) if keyspace.type_name(key) == "zset" else None
        if zset is not None:
            out[key] = ([(repr(s), m) for s, m in zset], zset.listpack)
        else:
            out[key] = plain_value(value)
    return out


def test_logged_ops_replay_to_the_same_keyspace() -> None:
    """A long random session's logged ops, applied to an empty store, rebuild it exactly."""
    log = RecordingLog()
    state = Core(Config(appendonly=False), sink=log)
    session = Session(state)
    gen = Generator(4242)
    commands = [list(map(render, argv)) for argv in setup()]
    for _ in range(1500):
        _, argv = gen.zset_command() if gen.rng.random() < 0.6 else gen.hash_command()
        commands.append([render(a) for a in argv])
    for argv in commands:
        dispatch.execute(session, argv)
    replayed = Keyspace()
    replayed.apply(log.ops)
    assert snapshot(replayed) == snapshot(state.keyspace)
    assert any(op[0] == b"ZADD" for op in log.ops) and any(op[0] == b"ZREM" for op in log.ops)


# --- the plans of the issue-26 commands ------------------------------------------------
def test_a_store_replaces_its_destination_in_one_plan(session: Session) -> None:
    dispatch.execute(session, [b"ZADD", b"b", b"2", b"a", b"-0", b"n"])
    result = plan_of(session, b"ZUNIONSTORE", b"z", b"2", b"z", b"b", b"WEIGHTS", b"1", b"3")
    assert type(result) is Plan
    # b's -0 was stored as 0 (a listpack); z is read before it is replaced
    assert result.ops == [(b"DEL", b"z"), (b"ZADD", b"z", 0, b"n", 2, b"b", 3, b"c", 7, b"a")]
    assert result.reply == 4
    assert plan_of(session, b"ZINTERSTORE", b"new", b"2", b"z", b"nokey").ops == []


def test_a_big_stored_result_sets_its_negative_zeros_once_it_is_a_skiplist(
        session: Session) -> None:
    dispatch.execute(session, [b"ZADD", b"big", *[x for i in range(200) for x in (b"%d" % i,
                                                                                  b"m%d" % i)]])
    dispatch.execute(session, [b"ZADD", b"big", b"-0", b"zero"])
    result = plan_of(session, b"ZDIFFSTORE", b"copy", b"1", b"big")
    first, second = result.ops
    assert first[:6] == (b"ZADD", b"copy", 0, b"m0", 1, b"zero")  # 1 until it is a skiplist
    assert second == (b"ZADD", b"copy", -0.0, b"zero")
    dispatch.execute(session, [b"ZDIFFSTORE", b"copy", b"1", b"big"])
    score = session.core.keyspace.zset(b"copy").score(b"zero")  # type: ignore[union-attr]
    assert score == 0 and math.copysign(1.0, score) < 0  # type: ignore[arg-type]


def test_a_blocking_pop_parks_on_its_keys_and_pops_like_zpopmin(session: Session) -> None:
    from emqd.commit.plan import Block
    from emqd.reply import NULL_ARRAY
    block = plan_of(session, b"BZPOPMIN", b"nokey", b"other", b"nokey", b"1.5")
    assert block == Block((b"nokey", b"other"), 1500, NULL_ARRAY)
    popped = plan_of(session, b"BZMPOP", b"0", b"2", b"nokey", b"z", b"MAX", b"COUNT", b"9")
    assert popped.ops == [(b"ZREM", b"z", b"c", b"b", b"a")]
    assert popped.reply == [b"z", [[b"c", 3.0], [b"b", 2.0], [b"a", 1.0]]]
    dispatch.execute(session, [b"MULTI"])
    dispatch.execute(session, [b"BZPOPMIN", b"nokey", b"0"])
    assert dispatch.execute(session, [b"EXEC"]) == [NULL_ARRAY]  # no wait in a transaction
