"""OBJECT against redis-server 7.0, byte for byte, RESP2 and RESP3: its subcommands as Redis
answers them under its default maxmemory-policy, and ENCODING after the same writes.

(The encoding limits changed by CONFIG SET are tests/commands/test_config.py's: those tests
run on servers of their own.)
"""

from __future__ import annotations

import pytest
import redis

from tests.support import RawClient
from tests.wire.compare import same_replies

LONG = "v" * 65  # one byte past a listpack's 64


def _pairs(count: int, prefix: str = "f") -> list[str]:
    return [x for i in range(count) for x in (f"{prefix}{i}", str(i))]


SUBCOMMANDS = [
    ("OBJECT",), ("OBJECT", "nope"), ("OBJECT", "nope", "k"), ("OBJECT", "HELP"),
    ("OBJECT", "help", "x"), ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "k", "x"),
    ("OBJECT", "FREQ"), ("OBJECT", "IDLETIME"), ("OBJECT", "REFCOUNT"),
    # no key: nil for each, before any policy is looked at
    ("OBJECT", "ENCODING", "k"), ("OBJECT", "FREQ", "k"), ("OBJECT", "IDLETIME", "k"),
    ("OBJECT", "REFCOUNT", "k"),
    ("HSET", "h", "f", "v"), ("ZADD", "z", "1", "m"),
    ("OBJECT", "REFCOUNT", "h"), ("OBJECT", "refcount", "z"),
    ("OBJECT", "FREQ", "h"), ("OBJECT", "FREQ", "z"),  # Redis's error: no LFU policy
    ("MULTI",), ("OBJECT", "ENCODING", "h"), ("OBJECT", "FREQ", "z"), ("EXEC",),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_object_subcommands_answer_as_redis(emqd_port: int, redis_ref: int, resp: int) -> None:
    same_replies(emqd_port, redis_ref, SUBCOMMANDS, resp=resp)


def test_idletime_of_a_key_is_refused_emqd_keeps_no_access_times(emqd_port: int) -> None:
    client = RawClient(emqd_port)
    try:
        client.command("HSET", "h", "f", "v")
        assert client.command("OBJECT", "IDLETIME", "h") == (
            b"-ERR emqd keeps no access times (it evicts nothing), idle time not tracked.\r\n")
    finally:
        client.close()


ENCODINGS = [
    # hashes: 512 fields of at most 64 bytes are a listpack, one more field or byte is not
    ("HSET", "h", *_pairs(512)), ("OBJECT", "ENCODING", "h"),
    ("HSET", "h", "f0", "x" * 64), ("OBJECT", "ENCODING", "h"),
    ("HSET", "h", "f512", "1"), ("OBJECT", "ENCODING", "h"),
    ("HDEL", "h", *[f"f{i}" for i in range(1, 513)]), ("HLEN", "h"), ("OBJECT", "ENCODING", "h"),
    ("HSET", "big", *_pairs(513)), ("OBJECT", "ENCODING", "big"),
    ("HSET", "v", "a", LONG), ("OBJECT", "ENCODING", "v"),
    ("HSET", "v2", "a", "1"), ("HSET", "v2", "a", LONG), ("HDEL", "v2", "a"),
    ("HSET", "v2", "a", "1"), ("OBJECT", "ENCODING", "v2"),  # emptied: a new key, small again
    ("HSET", "n", LONG, "1"), ("OBJECT", "ENCODING", "n"),
    ("HMSET", "m", "a", "1", "b", LONG), ("OBJECT", "ENCODING", "m"),
    ("HSETNX", "nx", "a", "1"), ("HSETNX", "nx", "b", LONG), ("OBJECT", "ENCODING", "nx"),
    ("HSETNX", "nx2", "a", "1"), ("HSETNX", "nx2", "a", LONG), ("OBJECT", "ENCODING", "nx2"),
    ("HINCRBY", "i", "a", "1"), ("HINCRBY", "i", LONG, "1"), ("OBJECT", "ENCODING", "i"),
    ("HGETALL", "v2"), ("HSCAN", "v2", "0"),
    # sorted sets: 128 members of at most 64 bytes are a listpack
    ("ZADD", "z", *_pairs(128, "m")[::-1]), ("OBJECT", "ENCODING", "z"),
    ("ZADD", "z", "5", "m0"), ("OBJECT", "ENCODING", "z"),  # a new score: still 128
    ("ZADD", "z", "1", "m128"), ("OBJECT", "ENCODING", "z"),
    ("ZREM", "z", *[f"m{i}" for i in range(1, 129)]), ("ZCARD", "z"), ("OBJECT", "ENCODING", "z"),
    ("ZADD", "zbig", *_pairs(129, "m")[::-1]), ("OBJECT", "ENCODING", "zbig"),
    ("ZADD", "zl", "1", "a", "2", LONG), ("OBJECT", "ENCODING", "zl"),
    ("ZADD", "zl2", "1", LONG), ("OBJECT", "ENCODING", "zl2"),
    ("ZADD", "zx", "XX", "1", LONG), ("OBJECT", "ENCODING", "zx"),  # XX on no key: no key
    ("ZADD", "zn", "1", "a"), ("ZADD", "zn", "NX", "1", "a"), ("ZADD", "zn", "XX", "2", LONG),
    ("OBJECT", "ENCODING", "zn"),  # XX of a new member adds nothing
    ("ZINCRBY", "zi", "1", "a"), ("ZINCRBY", "zi", "1", LONG), ("OBJECT", "ENCODING", "zi"),
    ("ZADD", "zz", "-0", "a", "1", LONG), ("ZSCORE", "zz", "a"),  # -0 stored as a listpack's 0
    ("ZADD", "zy", "1", LONG, "-0", "a"), ("ZSCORE", "zy", "a"),  # born a skiplist: -0
    ("ZPOPMIN", "zn"), ("ZPOPMIN", "zn"), ("OBJECT", "ENCODING", "zn"),
    ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZSCAN", "zn", "0"),
    ("TYPE", "z"), ("OBJECT", "ENCODING", "nope"),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_encoding_after_the_same_writes_is_redis_s(emqd_port: int, redis_ref: int,
                                                   resp: int) -> None:
    same_replies(emqd_port, redis_ref, ENCODINGS, resp=resp)


def test_a_job_row_and_its_sets_are_encoded_as_redis_would_hold_them(
        emqd_port: int, redis_ref: int) -> None:
    """The rows and sets the verbs write, copied field by field into Redis: same encoding."""
    with redis.Redis(port=emqd_port) as ours, redis.Redis(port=redis_ref) as theirs:
        ours.execute_command("EMQ.ADD", "q", "small")
        ours.execute_command("EMQ.ADD", "q", "p" * 100)  # a payload past 64 bytes
        for _ in range(130):
            ours.execute_command("EMQ.ADD", "many", "x")
        keys = ["emq:{q}:job:1", "emq:{q}:job:2", "emq:{q}:pending", "emq:{many}:pending",
                "emq:{many}:job:130"]
        for key in keys:
            if ours.type(key) == b"hash":
                row = ours.hgetall(key)
                theirs.hset(key, mapping=row)
            else:
                members = ours.zrange(key, 0, -1, withscores=True)
                theirs.zadd(key, dict(members))
        encodings = [[client.object("encoding", key) for key in keys] for client in (ours, theirs)]
    assert encodings[0] == encodings[1] == [b"listpack", b"hashtable", b"listpack", b"skiplist",
                                            b"listpack"]
