"""EMQ.GET: the row as HGETALL gives it, or nil."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.reply import NULL_ARRAY
from emqd.verbs import get
from tests.support import RawClient
from tests.verbs.planner import drive, keyspace

ROW = {"state": "active", "payload": "p", "attempts": "2", "lease_epoch": "e"}


@pytest.mark.parametrize(
    ("data", "argv", "expected"),
    [
        ({"emq:{q}:job:7": ROW}, ["emq.get", "q", "7"],
         {k.encode(): v.encode() for k, v in ROW.items()}),
        ({"emq:{q}:job:7": ROW}, ["emq.get", "q", "8"], NULL_ARRAY),
        ({"emq:{q}:job:7": ROW}, ["emq.get", "other", "7"], NULL_ARRAY),
        ({}, ["emq.get", "q", "1"], NULL_ARRAY),
        ({"emq:{q}:job:7": [("m", 1)]}, ["emq.get", "q", "7"], errors.WRONGTYPE),
        ({}, ["emq.get", "q{", "1"], errors.INVALID_QUEUE),
        ({}, ["emq.get", "q", ""], errors.INVALID_ID),
    ],
)
def test_planner(data: dict, argv: list, expected: object) -> None:
    assert drive(get, argv, keyspace(**data)) == expected


def test_reply_keeps_field_order_and_is_a_copy() -> None:
    space = keyspace(**{"emq:{q}:job:1": {"b": "1", "a": "2"}})
    reply = drive(get, ["emq.get", "q", "1"], space)
    assert list(reply) == [b"b", b"a"]
    space.apply([(b"HSET", b"emq:{q}:job:1", b"a", b"changed")])
    assert reply[b"a"] == b"2"  # a later command in the same EXEC cannot change it


def test_over_the_wire_same_bytes_as_hgetall(r: redis.Redis, raw: RawClient) -> None:
    job = r.execute_command("EMQ.ADD", "mail", "hello", "PRIORITY", "3")
    for resp in (2, 3):
        if resp == 3:
            raw.command("HELLO", "3")
        got = raw.command("EMQ.GET", "mail", job)
        assert got == raw.command("HGETALL", b"emq:{mail}:job:" + job)
        assert got.startswith(b"*8\r\n" if resp == 2 else b"%4\r\n")
        assert raw.command("emq.get", "mail", "nope") == (b"*-1\r\n" if resp == 2 else b"_\r\n")
    assert r.execute_command("EMQ.GET", "mail", "nope") is None
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'emq.get'"):
        r.execute_command("EMQ.GET", "mail")
