"""Hash command planners, directly: the plans they return and what they refuse.

No sockets: a Core and a Session, the handler called as the dispatcher
calls it. Replies over the wire are checked against Redis in tests/differential.
"""

from __future__ import annotations

from typing import Any

import pytest

from emqd import dispatch
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core, Session
from emqd.errors import HASH_NOT_INTEGER, NOT_INTEGER, OVERFLOW, WRONGTYPE, ReplyError
from tests.support import plain_value


@pytest.fixture
def session() -> Session:
    state = Core(Config(appendonly=False))
    session = Session(state)
    for argv in ([b"HSET", b"h", b"n", b"5", b"s", b"x"], [b"ZADD", b"z", b"1", b"a"]):
        dispatch.execute(session, argv)
    return session


def plan_of(session: Session, *argv: bytes) -> Any:
    """The handler's result for argv, without committing it (a ReplyError is returned)."""
    row = dispatch.TABLE[argv[0].lower()]
    try:
        return row.handler(session, list(argv))
    except ReplyError as error:
        return error


@pytest.mark.parametrize(
    "argv, ops, reply",
    [
        ((b"HSET", b"h", b"a", b"1", b"a", b"2"), [(b"HSET", b"h", b"a", b"1", b"a", b"2")], 1),
        ((b"HMSET", b"h", b"n", b"6"), [(b"HSET", b"h", b"n", b"6")], "OK"),
        ((b"HSETNX", b"h", b"new", b"v"), [(b"HSET", b"h", b"new", b"v")], 1),
        ((b"HINCRBY", b"h", b"n", b"-7"), [(b"HSET", b"h", b"n", b"-2")], -2),
        ((b"HINCRBY", b"fresh", b"f", b"3"), [(b"HSET", b"fresh", b"f", b"3")], 3),
        ((b"HDEL", b"h", b"n", b"n", b"nope"), [(b"HDEL", b"h", b"n")], 1),
        ((b"HDEL", b"h", b"nope"), [], 0),
    ],
)
def test_writes_plan_plain_resolved_ops(session: Session, argv: tuple, ops: list,
                                        reply: Any) -> None:
    result = plan_of(session, *argv)
    assert type(result) is Plan
    assert (result.ops, result.reply) == (ops, reply)


@pytest.mark.parametrize(
    "argv, answer",
    [
        ((b"HSETNX", b"h", b"n", b"v"), 0),
        ((b"HDEL", b"nokey", b"f"), 0),
        ((b"HINCRBY", b"h", b"s", b"1"), HASH_NOT_INTEGER),
        ((b"HINCRBY", b"h", b"n", b"9223372036854775807"), OVERFLOW),
        ((b"HINCRBY", b"z", b"n", b"x"), NOT_INTEGER),  # the increment is read first
        ((b"HINCRBY", b"z", b"n", b"1"), WRONGTYPE),
        ((b"HSET", b"z", b"f", b"v"), WRONGTYPE),
        ((b"HMSET", b"z", b"f", b"v"), WRONGTYPE),
        ((b"HSETNX", b"z", b"f", b"v"), WRONGTYPE),
        ((b"HDEL", b"z", b"f"), WRONGTYPE),
    ],
)
def test_refusals_and_no_ops_write_nothing(session: Session, argv: tuple, answer: Any) -> None:
    before = {k: plain_value(v) for k, v in session.core.keyspace.data.items()}
    assert dispatch.execute(session, list(argv)) == answer
    after = {k: plain_value(v) for k, v in session.core.keyspace.data.items()}
    assert after == before


def test_last_field_removed_removes_the_key(session: Session) -> None:
    dispatch.execute(session, [b"HDEL", b"h", b"n", b"s"])
    assert b"h" not in session.core.keyspace


def test_hscan_lists_a_small_hash_whole_and_walks_a_big_one(session: Session) -> None:
    assert dispatch.execute(session, [b"HSCAN", b"h", b"99"]) == [b"0", [b"n", b"5", b"s", b"x"]]
    dispatch.execute(session, [b"HSET", b"big", b"f", b"v" * 65, b"g", b"1", b"h", b"2"])
    seen: dict[bytes, bytes] = {}
    cursor = b"0"
    for _ in range(10):
        cursor, items = dispatch.execute(session, [b"HSCAN", b"big", cursor, b"COUNT", b"1"])
        seen.update(zip(items[::2], items[1::2], strict=True))
        if cursor == b"0":
            break
    assert seen == {b"f": b"v" * 65, b"g": b"1", b"h": b"2"}


def test_hincrbyfloat_logs_the_hset_of_its_text(session: Session) -> None:
    result = plan_of(session, b"HINCRBYFLOAT", b"h", b"n", b"0.25")
    assert (result.ops, result.reply) == ([(b"HSET", b"h", b"n", b"5.25")], b"5.25")


def test_a_random_answer_that_cannot_be_streamed_is_bounded(session: Session) -> None:
    """RESP3's nested [field, value] pairs are built whole: past BUILT_MAX picks they are
    refused rather than grown without bound; the same count of fields alone streams."""
    from emqd.commands.random_members import BUILT_MAX
    from emqd.errors import OUT_OF_RANGE
    from emqd.reply import Stream
    session.resp = 3
    count = b"-%d" % (BUILT_MAX + 1)
    assert plan_of(session, b"HRANDFIELD", b"h", count, b"WITHVALUES") == OUT_OF_RANGE
    streamed = plan_of(session, b"HRANDFIELD", b"h", count)
    assert type(streamed) is Stream and streamed.count == BUILT_MAX + 1
