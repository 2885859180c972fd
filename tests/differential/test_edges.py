"""Hand-written corners, each compared byte for byte with the reference, in RESP2 and RESP3.

The generated suite finds what chance finds; these are the corners worth
naming: every arity, every ZADD flag conflict, NaN, signed zero in both
encodings, integer edges, score texts, glob quirks, cursors, key removal.
"""

from __future__ import annotations

import pytest

from emqd.reply import STREAM_MIN
from tests.differential.harness import EXACT, SCAN, UNORDERED, Pair, parse, replay
from tests.support import encode_request

pytestmark = pytest.mark.redis_reference

HASH = [
    "HSET",
    "HSETNX",
    "HMSET",
    "HGET",
    "HMGET",
    "HGETALL",
    "HDEL",
    "HEXISTS",
    "HLEN",
    "HKEYS",
    "HVALS",
    "HINCRBY",
    "HSTRLEN",
    "HSCAN",
]
ZSET = [
    "ZADD",
    "ZINCRBY",
    "ZREM",
    "ZSCORE",
    "ZMSCORE",
    "ZCARD",
    "ZCOUNT",
    "ZLEXCOUNT",
    "ZRANK",
    "ZREVRANK",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGE",
    "ZREVRANGEBYSCORE",
    "ZRANGEBYLEX",
    "ZREVRANGEBYLEX",
    "ZPOPMIN",
    "ZPOPMAX",
    "ZREMRANGEBYSCORE",
    "ZREMRANGEBYRANK",
    "ZSCAN",
]

CASES: dict[str, list[tuple]] = {
    "arity": [(name, *["k", "1", "2", "3", "4"][:n]) for name in HASH + ZSET for n in range(5)],
    "wrongtype": [
        ("HSET", "h", "f", "v"),
        ("ZADD", "z", "1", "a"),
        *[(name, "z", "f", "1") for name in HASH if name not in ("HSET", "HMSET")],
        ("HSET", "z", "f", "v"),
        ("HMSET", "z", "f", "v"),
        ("HSET", "z", "f"),
        ("HINCRBY", "z", "f", "x"),  # the increment is read before the type
        *[(name, "h", "1", "2") for name in ZSET],
        ("ZADD", "h", "x", "a"),  # the score is read before the type
        ("ZADD", "h", "XX", "1", "a"),
        ("ZRANGE", "h", "x", "1"),
        ("ZRANGE", "h", "0", "1", "x"),
        ("ZCOUNT", "h", "x", "1"),
        ("ZLEXCOUNT", "h", "x", "+"),
        ("ZPOPMIN", "h", "x"),
        ("ZSCAN", "h", "x"),
        ("HSCAN", "z", "x"),
        ("ZSCAN", "h", "0", "COUNT", "0"),
    ],
    "hash basics": [
        ("HSET", "h", "a", "1", "b", "2", "a", "3"),
        ("HGETALL", "h"),
        ("HSET", "h", "c", "4"),
        ("HMSET", "h", "d", "5", "a", "6"),
        ("HSETNX", "h", "a", "x"),
        ("HSETNX", "h", "e", "x"),
        ("HKEYS", "h"),
        ("HVALS", "h"),
        ("HMGET", "h", "a", "zz", "", "a"),
        ("HMGET", "nokey", "a", "b"),
        ("HGET", "nokey", "a"),
        ("HGETALL", "nokey"),
        ("HKEYS", "nokey"),
        ("HLEN", "nokey"),
        ("HSTRLEN", "h", "a"),
        ("HSTRLEN", "h", "zz"),
        ("HEXISTS", "h", "a"),
        ("HEXISTS", "h", "zz"),
        ("HDEL", "h", "a", "a", "zz"),
        ("HDEL", "nokey", "a"),
        ("HDEL", "h", "b", "c", "d", "e"),
        ("EXISTS", "h"),
        ("HSET", "", "", ""),
        ("HGETALL", ""),
        ("HSTRLEN", "", ""),
        ("TYPE", ""),
    ],
    "hincrby": [
        ("HINCRBY", "h", "n", "5"),
        ("HINCRBY", "h", "n", "-9223372036854775808"),
        ("HINCRBY", "h", "n", "-1"),
        ("HINCRBY", "h", "n", "-100"),
        ("HSET", "h", "max", "9223372036854775807"),
        ("HINCRBY", "h", "max", "1"),
        ("HINCRBY", "h", "max", "0"),
        ("HINCRBY", "h", "max", "-1"),
        ("HSET", "h", "bad", "01", "sp", " 1", "plus", "+1", "neg0", "-0", "fl", "1.5"),
        *[("HINCRBY", "h", f, "1") for f in ("bad", "sp", "plus", "neg0", "fl")],
        *[
            ("HINCRBY", "h", "n", i)
            for i in ("01", "+1", " 1", "1.0", "", "-0", "9223372036854775808", "0x1", "1e3")
        ],
        ("HGETALL", "h"),
        ("HINCRBY", "fresh", "f", "0"),
        ("HGETALL", "fresh"),
    ],
    "zadd flags": [
        ("ZADD", "z", "1", "a", "2", "b"),
        ("ZADD", "z", "NX", "XX", "1", "a"),
        ("ZADD", "z", "GT", "LT", "1", "a"),
        ("ZADD", "z", "GT", "NX", "1", "a"),
        ("ZADD", "z", "LT", "NX", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"),
        ("ZADD", "z", "XX", "NX", "INCR", "1", "a", "2", "b"),
        ("ZADD", "z", "NX", "1"),
        ("ZADD", "z", "CH"),
        ("ZADD", "z", "ch", "1", "a", "2"),
        ("ZADD", "z", "1", "nx"),
        ("ZADD", "z", "NX", "5", "a", "3", "c"),
        ("ZADD", "z", "XX", "5", "a", "3", "d"),
        ("ZADD", "z", "XX", "CH", "6", "a", "3", "e"),
        ("ZADD", "z", "GT", "CH", "1", "a", "9", "b"),
        ("ZADD", "z", "LT", "CH", "1", "a", "99", "b"),
        ("ZADD", "z", "GT", "10", "new"),
        ("ZADD", "z", "CH", "1", "q", "2", "q", "2", "q"),
        ("ZADD", "z", "1", "r", "1", "r"),
        ("ZADD", "z", "INCR", "5", "a"),
        ("ZADD", "z", "NX", "INCR", "5", "a"),
        ("ZADD", "z", "XX", "INCR", "5", "zz"),
        ("ZADD", "z", "GT", "INCR", "-1", "a"),
        ("ZADD", "z", "LT", "INCR", "-1", "a"),
        ("ZADD", "z", "GT", "XX", "INCR", "1", "a"),
        ("ZADD", "nokey", "XX", "1", "a"),
        ("ZADD", "nokey", "XX", "INCR", "1", "a"),
        ("EXISTS", "nokey"),
        ("ZADD", "nokey", "INCR", "2.5", "m"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ],
    "nan and inf": [
        ("ZADD", "z", "inf", "a", "-inf", "b"),
        ("ZINCRBY", "z", "-inf", "a"),
        ("ZADD", "z", "INCR", "inf", "b"),
        ("ZINCRBY", "z", "inf", "a"),
        ("ZINCRBY", "z", "1", "a"),
        ("ZINCRBY", "z", "nan", "a"),
        ("ZADD", "z", "nan", "a"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZCOUNT", "z", "inf", "inf"),
        ("ZCOUNT", "z", "(inf", "+inf"),
        ("ZCOUNT", "z", "-inf", "(-inf"),
        ("ZINCRBY", "z", "1e308", "big"),
        ("ZINCRBY", "z", "1e308", "big"),
        ("ZSCORE", "z", "big"),
    ],
    "score texts": [
        *[
            ("ZADD", "z", s, f"m{i}")
            for i, s in enumerate(
                [
                    "0.1",
                    "1e17",
                    "123456789012345678",
                    "5e-324",
                    "0x1p-3",
                    "1.5",
                    "-2.5",
                    "4503599627370497",
                    "3.0000000000000004",
                    "1e-5",
                    ".5",
                    "5.",
                    "+7",
                    "1E2",
                    "-0",
                    "1e300",
                    "4611686018427387904",
                    "4611686018427387905",
                    "-4611686018427387904",
                    "9.2233720368547758e18",
                ]
            )
        ],
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZSCAN", "z", "0"),
        ("ZMSCORE", "z", "m0", "m1", "x"),
        ("ZPOPMAX", "z"),
        ("ZPOPMIN", "z", "2"),
        ("ZREVRANGE", "z", "0", "2", "WITHSCORES"),
    ],
    "negative zero": [
        ("ZADD", "small", "INCR", "-0", "m"),
        ("ZSCORE", "small", "m"),
        ("ZADD", "small", "-0", "n"),
        ("ZSCAN", "small", "0"),
        ("ZRANGE", "small", "0", "-1", "WITHSCORES"),
        ("ZADD", "big", *[x for i in range(130) for x in (str(i + 1), f"m{i}")]),
        ("ZADD", "big", "-0", "neg"),
        ("ZSCORE", "big", "neg"),
        ("ZINCRBY", "big", "-0", "neg"),
        ("ZADD", "big", "0", "neg"),
        ("ZSCORE", "big", "neg"),
        ("ZRANGE", "big", "0", "1", "WITHSCORES"),
        ("ZADD", "edge", *[x for i in range(127) for x in ("5", f"m{i}")]),
        ("ZADD", "edge", "1", "a", "2", "b", "-0", "a"),
        ("ZSCORE", "edge", "a"),
        ("ZCOUNT", "edge", "0", "0"),
        ("ZRANGEBYSCORE", "edge", "(-0", "0"),
    ],
    "ranks": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"),
        *[
            (cmd, "z", s, e)
            for cmd in ("ZRANGE", "ZREVRANGE")
            for s, e in [
                ("0", "-1"),
                ("-100", "100"),
                ("2", "1"),
                ("-1", "-1"),
                ("4", "10"),
                ("-5", "-4"),
                ("9223372036854775807", "9223372036854775807"),
                ("-9223372036854775808", "0"),
                ("0", "-9223372036854775808"),
                ("1", "01"),
                ("+1", "2"),
                ("1.0", "2"),
            ]
        ],
        ("ZRANK", "z", "c"),
        ("ZREVRANK", "z", "c"),
        ("ZRANK", "z", "x"),
        ("ZRANK", "nokey", "x"),
        ("ZREMRANGEBYRANK", "z", "5", "10"),
        ("ZREMRANGEBYRANK", "z", "-2", "-1"),
        ("ZREMRANGEBYRANK", "z", "0", "-1"),
        ("EXISTS", "z"),
        ("ZREMRANGEBYRANK", "z", "0", "x"),
    ],
    "score ranges": [
        ("ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "-inf", "lo", "inf", "hi"),
        *[
            (cmd, "z", lo, hi)
            for cmd in ("ZRANGEBYSCORE", "ZCOUNT")
            for lo, hi in [
                ("-inf", "+inf"),
                ("(1", "3"),
                ("1", "(3"),
                ("(2", "(2"),
                ("2", "2"),
                ("3", "1"),
                ("", "2"),
                ("(", "2"),
                (" 2", "3"),
                ("2 ", "3"),
                ("1e400", "inf"),
                ("-1e400", "0"),
                ("nan", "1"),
                ("[1", "2"),
                ("((1", "2"),
                ("0x1", "0x2"),
                ("1\x00junk", "2"),
            ]
        ],
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "-1"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "0"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "6", "1"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "x", "1"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "REV"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES", "LIMIT", "1", "3"),
        ("ZREVRANGEBYSCORE", "z", "2", "1"),
        ("ZREVRANGEBYSCORE", "z", "1", "2"),
        ("ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "1", "WITHSCORES"),
        ("ZRANGE", "z", "+inf", "(1", "BYSCORE", "REV", "LIMIT", "0", "2"),
        ("ZRANGE", "z", "0", "1", "LIMIT", "0", "1"),
        ("ZRANGE", "z", "0", "1", "LIMIT", "5", "-1"),
        ("ZRANGE", "z", "0", "1", "REV", "REV"),
        ("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"),
        ("ZREMRANGEBYSCORE", "z", "(1", "2"),
        ("ZREMRANGEBYSCORE", "z", "x", "2"),
        ("ZREMRANGEBYSCORE", "z", "-inf", "+inf"),
        ("EXISTS", "z"),
    ],
    "lex ranges": [
        ("ZADD", "z", *[x for m in ("a", "b", "bb", "c", "d", "", "\xff") for x in ("0", m)]),
        *[
            (cmd, "z", lo, hi)
            for cmd in ("ZRANGEBYLEX", "ZLEXCOUNT", "ZREVRANGEBYLEX")
            for lo, hi in [
                ("-", "+"),
                ("+", "-"),
                ("[b", "[c"),
                ("(b", "(c"),
                ("[bb", "(bb"),
                ("[", "[a"),
                ("(", "+"),
                ("-", "(b"),
                ("a", "+"),
                ("", "+"),
                ("+x", "+"),
                ("+\x00x", "+"),
                ("-", "-"),
                ("+", "+"),
                ("[c", "[b"),
            ]
        ],
        ("ZRANGEBYLEX", "z", "-", "+", "LIMIT", "1", "2"),
        ("ZRANGEBYLEX", "z", "-", "+", "LIMIT", "-1", "2"),
        ("ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"),
        ("ZRANGE", "z", "[b", "[d", "BYLEX", "LIMIT", "1", "5"),
        ("ZRANGE", "z", "[d", "[b", "BYLEX", "REV"),
        ("ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"),
        ("ZREVRANGEBYLEX", "z", "+", "-", "LIMIT", "2", "-1"),
        # mixed scores in a listpack: Redis walks the list, and so does emqd
        ("ZADD", "mixed", "0", "c", "1", "a", "2", "d", "3", "b"),
        ("ZRANGEBYLEX", "mixed", "[b", "[c"),
        ("ZLEXCOUNT", "mixed", "[b", "[c"),
        ("ZREVRANGEBYLEX", "mixed", "[c", "[b"),
        ("ZRANGEBYLEX", "mixed", "[a", "[a"),
        ("ZRANGEBYLEX", "mixed", "-", "[c", "LIMIT", "1", "-1"),
    ],
    "pops": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"),
        ("ZPOPMIN", "z"),
        ("ZPOPMAX", "z"),
        ("ZPOPMIN", "z", "0"),
        ("ZPOPMIN", "z", "1"),
        ("ZPOPMAX", "z", "-1"),
        ("ZPOPMAX", "z", "x"),
        ("ZPOPMAX", "z", "1", "2"),
        ("ZPOPMAX", "z", "10"),
        ("EXISTS", "z"),
        ("ZPOPMIN", "z"),
        ("ZPOPMIN", "z", "3"),
        ("ZPOPMIN", "nokey", "0"),
        ("ZPOPMIN", "nokey", "-1"),
    ],
    "zrem and reads": [
        ("ZADD", "z", "1", "a", "2", "b"),
        ("ZREM", "z", "a", "a", "x"),
        ("ZREM", "nokey", "a"),
        ("ZCARD", "z"),
        ("ZCARD", "nokey"),
        ("ZSCORE", "nokey", "a"),
        ("ZMSCORE", "nokey", "a", "b"),
        ("ZREM", "z", "b"),
        ("TYPE", "z"),
        ("ZADD", "", "1", ""),
        ("ZRANGE", "", "0", "-1", "WITHSCORES"),
    ],
    "inside MULTI": [
        ("MULTI",),
        ("HSET", "h", "a", "1"),
        ("HINCRBY", "h", "a", "x"),
        ("ZADD", "z", "1.5", "a", "2", "b"),
        ("ZINCRBY", "z", "1", "a"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZADD", "h", "1", "a"),
        ("ZPOPMIN", "z", "1"),
        ("HGETALL", "h"),
        ("EXEC",),
        ("MULTI",),
        ("ZADD", "z", "1"),
        ("HSET", "h", "b", "2"),
        ("EXEC",),
        ("HGETALL", "h"),
    ],
}

GLOB_FIELDS = [
    b"",
    b"a",
    b"b",
    b"ab",
    b"abc",
    b"aXbYc",
    b"aXbY",
    b"*",
    b"?",
    b"[",
    b"]",
    b"\\",
    b"a\\",
    b"x",
    b"\x00",
    b"\x90",
    b"\xff",
    b"f1",
    b"F1",
    b"hello",
    b"hallo",
    b"a\x00b",
    b"-",
    b"^",
]
GLOB_PATTERNS = [
    b"*",
    b"**",
    b"",
    b"?",
    b"??",
    b"a*",
    b"*a",
    b"a*b*c",
    b"h?llo",
    b"[abc]",
    b"[^abc]",
    b"[a-c]*",
    b"[c-a]*",
    b"[]",
    b"[^]",
    b"[",
    b"[ab",
    b"[a-]",
    b"[\\]]",
    b"\\*",
    b"\\",
    b"a\\",
    b"[\x80-\xff]",
    b"[a-\xff]",
    b"*\x00*",
    b"f*",
    b"[-a]",
    b"[a-b-c]",
    b"[\\",
    b"[^",
    b"*[",
    b"\\[",
    b"?*",
    b"*?",
    b"[^a-]*",
]


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_edge_cases(emqd_port: int, redis_ref: int, name: str, resp: int) -> None:
    replay(emqd_port, redis_ref, resp, f"edges {name!r} resp={resp}", CASES[name])


@pytest.mark.parametrize("resp", [2, 3])
def test_glob_patterns(emqd_port: int, redis_ref: int, resp: int) -> None:
    pair = Pair(emqd_port, redis_ref, resp, label=f"glob resp={resp}")
    try:
        pair.same("HSET", "h", *[x for f in GLOB_FIELDS for x in (f, b"v")])
        pair.same("ZADD", "z", *[x for f in GLOB_FIELDS for x in (b"1", f)])
        for pattern in GLOB_PATTERNS:
            pair.same("HSCAN", "h", "0", "MATCH", pattern)
            pair.same("ZSCAN", "z", "0", "MATCH", pattern, "COUNT", "1")
    finally:
        pair.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_cursors_and_big_collections(emqd_port: int, redis_ref: int, resp: int) -> None:
    """Small objects answer whole with cursor 0 whatever the cursor; big ones scan fully."""
    pair = Pair(emqd_port, redis_ref, resp, label=f"cursors resp={resp}")
    try:
        pair.same("HSET", "h", "a", "1", "b", "2")
        pair.same("ZADD", "z", "1", "a", "2", "b")
        for cursor in [
            b"0",
            b"7",
            b"",
            b"-1",
            b"+3",
            b"18446744073709551615",
            b"18446744073709551616",
            b" 1",
            b"1 ",
            b"x",
            b"0x1",
            b"5\x00x",
        ]:
            pair.same("HSCAN", "h", cursor)
            pair.same("ZSCAN", "z", cursor, "COUNT", "1")
            pair.same("HSCAN", "nokey", cursor, "COUNT", "0")
        pair.same("HSET", "hbig", *[x for i in range(600) for x in (b"f%d" % i, b"v%d" % i)])
        pair.same("HSET", "hlong", "f", "x" * 65, "g", "1")
        pair.same("ZADD", "zbig", *[x for i in range(300) for x in (b"%d" % (i % 7), b"m%d" % i)])
        pair.same("ZADD", "zlong", "1", "x" * 65, "2", "y")
        for key, command in [
            ("hbig", "HSCAN"),
            ("hlong", "HSCAN"),
            ("zbig", "ZSCAN"),
            ("zlong", "ZSCAN"),
        ]:
            for options in [
                (),
                ("COUNT", "1"),
                ("COUNT", "1000"),
                ("MATCH", "*1*"),
                ("MATCH", "f1?", "COUNT", "3"),
            ]:
                pair.check(SCAN, (command, key, "0", *options))
            pair.check(UNORDERED, ("HGETALL", key)) if command == "HSCAN" else None
        pair.check(UNORDERED, ("HKEYS", "hbig"))
        pair.check(UNORDERED, ("HVALS", "hlong"))
        pair.check(EXACT, ("ZRANGE", "zbig", "0", "-1", "WITHSCORES"))
    finally:
        pair.close()


@pytest.mark.parametrize("argv", [(b"SET", b"k", b"v"), (b"SADD", b"s", b"m")])
def test_commands_left_out_are_unknown(emqd_port: int, redis_ref: int, argv: tuple) -> None:
    """Outside section 7's list: emqd answers as Redis answers a command it lacks."""
    pair = Pair(emqd_port, redis_ref)
    try:
        unknown = pair.redis.command(b"NO-SUCH-CMD", *argv[1:])
        assert pair.emqd.command(*argv) == unknown.replace(b"NO-SUCH-CMD", argv[0])
    finally:
        pair.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_big_replies_match_redis(emqd_port: int, redis_ref: int, resp: int) -> None:
    """Replies big enough to be streamed in chunks (reply.STREAM_MIN items and more) are
    the bytes Redis sends, or the same collection where Redis's order is its hashtable's;
    inside MULTI too, where EXEC holds them."""
    pair = Pair(emqd_port, redis_ref, resp, label=f"big replies resp={resp}")
    size = 3 * STREAM_MIN
    try:
        pair.same("HSET", "h", *[x for i in range(size) for x in (b"f%d" % i, b"v%d" % i)])
        pair.same("ZADD", "z", *[x for i in range(size) for x in (b"%d" % (i % 97), b"m%d" % i)])
        pair.same("ZADD", "zlong", *[x for i in range(size)
                                     for x in (b"%d.5" % i, b"x" * 70 + b"%d" % i)])
        pair.same("ZADD", "zlex", *[x for i in range(size) for x in (b"0", b"w%05d" % i)])
        for argv in [("HGETALL", "h"), ("HKEYS", "h"), ("HVALS", "h")]:
            pair.check(UNORDERED, argv)
        for argv in [("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
                     ("ZRANGE", "z", "0", "-1", "REV", "WITHSCORES"),
                     ("ZREVRANGE", "zlong", "0", "-1"),
                     ("ZRANGEBYSCORE", "zlong", "-inf", "+inf", "WITHSCORES"),
                     ("ZRANGE", "z", "10", "+inf", "BYSCORE", "LIMIT", "5", "2000"),
                     ("ZRANGE", "zlong", "-2500", "-2"), ("ZRANGEBYLEX", "zlex", "-", "+"),
                     ("ZREVRANGEBYLEX", "zlex", "+", "(w00007")]:
            pair.check(EXACT, argv)
        pair.same("MULTI")
        pair.same("ZRANGE", "zlong", "0", "-1", "WITHSCORES")
        pair.same("ZADD", "zlong", "0", "changed")
        pair.same("EXEC")
        pair.same("DEL", "h", "z", "zlong", "zlex")
        for i in range(size):
            pair.emqd.send(encode_request("HSET", b"k%d" % i, "f", "v"))
            pair.redis.send(encode_request("HSET", b"k%d" % i, "f", "v"))
        for _ in range(size):
            assert pair.emqd.read_reply() == pair.redis.read_reply()
        mine, theirs = pair.both("KEYS", "*")
        assert sorted(parse(mine)[1]) == sorted(parse(theirs)[1])
        mine, theirs = pair.both("KEYS", "k1*")
        assert sorted(parse(mine)[1]) == sorted(parse(theirs)[1])
    finally:
        pair.close()
