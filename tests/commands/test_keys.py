"""Key commands against redis-server 7.0: byte for byte, KEYS and SCAN as sets."""

from __future__ import annotations

import random

import pytest
import redis

from emqd.compat.glob import compile_pattern
from tests.wire.compare import same_replies

SETUP = [("HSET", "h1", "f", "v"), ("HSET", "h2", "f", "v"), ("ZADD", "z1", "1", "m"),
         ("HSET", "", "f", "v")]


def test_key_commands_answer_like_redis(emqd_port: int, redis_ref: int) -> None:
    same_replies(emqd_port, redis_ref, SETUP + [
        ("EXISTS", "h1"), ("EXISTS", "h1", "h1", "nope", "z1"), ("EXISTS",),
        ("TYPE", "h1"), ("TYPE", "z1"), ("TYPE", "nope"), ("TYPE",), ("TYPE", "a", "b"),
        ("DBSIZE",), ("DBSIZE", "x"),
        ("DEL", "h1", "h1", "nope"), ("DEL", "h1"), ("DEL",), ("EXISTS", "h1"),
        ("UNLINK", "h2", "z1", "nope"), ("UNLINK",), ("DBSIZE",),
        ("KEYS",), ("KEYS", "a", "b"),
        ("SCAN",), ("SCAN", "x"), ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "x"),
        ("SCAN", "0", "COUNT", "-1"), ("SCAN", "0", "TYPE"), ("SCAN", "0", "MATCH"),
        ("SCAN", "0", "FOO", "bar"), ("SCAN", "18446744073709551616"), ("SCAN", " 1"),
        ("SCAN", "0x1"), ("SCAN", "-"), ("SCAN", "0", "COUNT", "x", "TYPE"),
        ("SCAN", "0", "TYPE", "hash", "COUNT", "0"), ("SCAN", "0", "COUNT", "TYPE"),
        ("SCAN", "0", "TYPE", "hash", "BAD"), ("SCAN", "0", "type", "x", "count", "-5"),
        ("HSET", "h3", "f", "v"),
        ("FLUSHDB", "x"), ("FLUSHALL", "ASYNC", "SYNC"), ("FLUSHALL", "bad"),
        ("FLUSHDB", "ASYNC"), ("DBSIZE",), ("HSET", "h3", "f", "v"), ("FLUSHALL", "sync"),
        ("FLUSHALL",), ("DBSIZE",), ("SCAN", "0"), ("KEYS", "*"),
        ("SCAN", "0", "MATCH", "a", "MATCH", "*", "COUNT", "5", "TYPE", "zset", "TYPE", "hash"),
    ])


def _fill(port: int, keys: list[bytes]) -> redis.Redis:
    client = redis.Redis(port=port)
    pipe = client.pipeline(transaction=False)
    for i, key in enumerate(keys):
        if i % 3:
            pipe.hset(key, "f", "v")
        else:
            pipe.zadd(key, {"m": 1})
    pipe.execute()
    return client


KEYS = [b"", b"a", b"ab", b"abc", b"a*c", b"a?c", b"a[b]c", b"a\\c", b"A", b"-", b"]", b"^",
        b"job:1", b"job:12", b"job:x", b"emq:{q}:job:7", b"emq:{q}:pending", b"\x00\xff", b"x y"]
PATTERNS = [b"*", b"**", b"", b"a", b"a*", b"*c", b"a?c", b"a\\*c", b"a\\?c", b"a[bc]c",
            b"a[^b]c", b"a[b-c]*", b"a[c-a]c", b"[", b"a[", b"a[b", b"[^", b"[]]", b"[a-]",
            b"\\", b"a\\", b"job:[0-9]", b"job:[0-9]*", b"emq:{q}:*", b"*:*:*", b"?", b"??",
            b"*[", b"a[\\]]c", b"[\\-]", b"*\\", b"x y", b"\x00*"]


@pytest.mark.parametrize("pattern", PATTERNS, ids=repr)
def test_keys_and_scan_match_like_redis(pattern: bytes, emqd_port: int, redis_ref: int) -> None:
    ours, theirs = _fill(emqd_port, KEYS), _fill(redis_ref, KEYS)
    try:
        expected = set(theirs.keys(pattern))
        assert set(ours.keys(pattern)) == expected
        assert set(ours.scan_iter(match=pattern, count=3)) == expected
        assert {k for k in KEYS if compile_pattern(pattern)(k)} == expected
    finally:
        ours.close()
        theirs.close()


def test_random_patterns_match_like_redis(emqd_port: int, redis_ref: int) -> None:
    rng = random.Random(7)
    alphabet = b"ab*?[]^-\\c"
    keys = sorted({bytes(rng.choice(b"abc-^]\\*") for _ in range(rng.randint(0, 5)))
                   for _ in range(200)})
    ours, theirs = _fill(emqd_port, keys), _fill(redis_ref, keys)
    try:
        for _ in range(150):
            pattern = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
            assert set(ours.keys(pattern)) == set(theirs.keys(pattern)), pattern
    finally:
        ours.close()
        theirs.close()


def test_scan_type_filter_and_cursor_cover_the_keyspace(emqd_port: int, redis_ref: int) -> None:
    keys = [b"k%d" % i for i in range(300)]
    ours, theirs = _fill(emqd_port, keys), _fill(redis_ref, keys)
    try:
        for kind in ("hash", "zset", "string", "nosuch"):
            assert set(ours.scan_iter(_type=kind, count=7)) == set(theirs.scan_iter(_type=kind))
        cursor, seen, calls = 0, [], 0
        while True:
            cursor, batch = ours.scan(cursor, count=10)
            seen += batch
            calls += 1
            if cursor == 0:
                break
        assert sorted(seen) == sorted(keys)  # each key exactly once
        assert 1 < calls <= 64
    finally:
        ours.close()
        theirs.close()


def test_scan_returns_every_key_present_throughout_despite_writes(r: redis.Redis) -> None:
    stable = {b"s%d" % i for i in range(200)}
    for key in stable:
        r.hset(key, "f", "v")
    cursor, seen, round_ = 0, set(), 0
    while True:
        cursor, batch = r.scan(cursor, count=5)
        seen.update(batch)
        round_ += 1
        r.hset(b"new%d" % round_, "f", "v")  # keys come and go between calls
        r.delete(b"new%d" % (round_ - 1))
        if cursor == 0:
            break
    assert stable <= seen


def test_writes_log_plain_ops() -> None:
    from emqd.commands.keys import del_, flush
    from emqd.commit.plan import Plan
    from emqd.config import Config
    from emqd.core import Core, Session

    state = Core(Config())
    state.commit.apply(Plan([(b"HSET", b"a", b"f", b"v"), (b"HSET", b"b", b"f", b"v")]))
    session = Session(state)
    plan = del_(session, [b"UNLINK", b"a", b"a", b"zz"])
    assert (plan.ops, plan.reply) == ([(b"DEL", b"a")], 1)
    assert del_(session, [b"DEL", b"zz"]).ops == []
    assert flush(session, [b"FLUSHDB", b"ASYNC"]).ops == [(b"FLUSHALL",)]
