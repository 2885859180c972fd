"""The server over a real socket: the first conversation any client has."""

from __future__ import annotations

import redis

from tests.support import RawClient, encode_request


def test_ping_and_hash_round_trip(r: redis.Redis) -> None:
    assert r.ping() is True
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2"}


def test_pipelined_requests_answer_in_order(raw: RawClient) -> None:
    raw.send(encode_request("PING") + encode_request("ECHO", "x") + encode_request("PING", "y"))
    assert [raw.read_reply() for _ in range(3)] == [b"+PONG\r\n", b"$1\r\nx\r\n", b"$1\r\ny\r\n"]


def test_inline_command(raw: RawClient) -> None:
    raw.send(b'PING\r\nECHO "a b"\r\n')
    assert raw.read_reply() == b"+PONG\r\n"
    assert raw.read_reply() == b"$3\r\na b\r\n"


def test_same_replies_as_redis(raw: RawClient, redis_ref: int) -> None:
    ref = RawClient(redis_ref)
    try:
        for argv in (("PING",), ("ECHO", "e"), ("NOSUCH", "a", "b"), ("HSET", "k", "f"),
                     ("HSET", "k", "f", "v"), ("HGET", "k", "f"), ("HGETALL", "nope")):
            assert raw.command(*argv) == ref.command(*argv), argv
    finally:
        ref.close()
