"""The rest of the hash and sorted-set families, corner by corner, byte for byte with Redis.

ZUNION ZINTER ZDIFF (and their STOREs) ZINTERCARD ZMPOP BZMPOP BZPOPMIN
BZPOPMAX ZRANGESTORE ZREMRANGEBYLEX HINCRBYFLOAT, the deterministic corners of
ZRANDMEMBER and HRANDFIELD (their errors, count 0, a count that covers a small
value), TTL PTTL EXPIRETIME PEXPIRETIME PERSIST TOUCH RANDOMKEY: arities,
errors in Redis's order, RESP2 and RESP3 shapes, what a STORE leaves behind
(OBJECT ENCODING included), and inside MULTI, where a blocking pop does not
wait. The property tests (test_family_properties.py) then vary the values.
"""

from __future__ import annotations

import pytest

from tests.differential.harness import replay

pytestmark = pytest.mark.redis_reference

NEW = ["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZINTERCARD",
       "ZMPOP", "BZMPOP", "BZPOPMIN", "BZPOPMAX", "ZRANGESTORE", "ZREMRANGEBYLEX",
       "HINCRBYFLOAT", "ZRANDMEMBER", "HRANDFIELD", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME",
       "PERSIST", "TOUCH", "RANDOMKEY"]

_SETS = [
    ("ZADD", "a", "1", "x", "2", "y", "3", "z"),
    ("ZADD", "b", "10", "y", "20", "z", "30", "w"),
    ("ZADD", "c", "-inf", "x", "inf", "y"),
    ("HSET", "h", "f", "v"),
]

CASES: dict[str, list[tuple]] = {
    # arity: every new command with 0..4 arguments that cannot block (a timeout of "x")
    "arity": [(name, *["k", "1", "k", "x"][:n]) for name in NEW for n in range(4)
              if not (name.startswith("BZ") and n >= 2)],
    "algebra errors": [
        *_SETS,
        *[(cmd, *args) for cmd in ("ZUNION", "ZINTER", "ZDIFF", "ZINTERCARD")
          for args in [("0", "a"), ("-1", "a"), ("x", "a"), ("01", "a"), ("2", "a"),
                       ("9223372036854775807", "a"), ("9223372036854775808", "a"),
                       ("1", "h"), ("2", "nokey", "h"), ("1", "a", "WEIGHTS"),
                       ("1", "a", "WEIGHTS", "x"), ("1", "a", "WEIGHTS", "nan"),
                       ("1", "a", "WEIGHTS", "1", "2"), ("2", "a", "b", "WEIGHTS", "1"),
                       ("1", "a", "AGGREGATE"), ("1", "a", "AGGREGATE", "avg"),
                       ("1", "a", "aggregate", "MIN", "aggregate", "max"),
                       ("1", "a", "WITHSCORES", "WITHSCORES"), ("1", "a", "LIMIT", "1"),
                       ("1", "a", "LIMIT", "-1"), ("1", "a", "LIMIT", "x"),
                       ("1", "a", "LIMIT", "0"), ("1", "h", "WEIGHTS", "x"),
                       ("1", "a", "WEIGHTS", "x", "AGGREGATE", "foo"), ("1", "a", "foo")]],
        *[(cmd, "d", *args) for cmd in ("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE")
          for args in [("0", "a"), ("x", "a"), ("2", "a"), ("1", "h"),
                       ("1", "a", "WITHSCORES"), ("1", "a", "WEIGHTS", "2"),
                       ("1", "a", "AGGREGATE", "max")]],
        ("EXISTS", "d"),
    ],
    "algebra": [
        *_SETS,
        ("ZADD", "neg", "-0", "x", "5", "q"),
        *[(cmd, *args) for cmd in ("ZUNION", "ZINTER")
          for args in [("2", "a", "b"), ("2", "a", "b", "WITHSCORES"),
                       ("3", "a", "b", "c", "WITHSCORES"),
                       ("2", "a", "c", "WEIGHTS", "0", "0", "WITHSCORES"),
                       ("2", "a", "c", "WEIGHTS", "1", "-1", "WITHSCORES"),
                       ("2", "c", "c", "WEIGHTS", "1", "-1", "WITHSCORES"),
                       ("2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"),
                       ("2", "a", "b", "AGGREGATE", "max", "WEIGHTS", "2", "0.5", "WITHSCORES"),
                       ("2", "a", "nokey", "WITHSCORES"), ("1", "nokey"),
                       ("2", "a", "a", "WITHSCORES"), ("2", "neg", "a", "WITHSCORES"),
                       ("2", "neg", "neg", "WEIGHTS", "-1", "1", "WITHSCORES")]],
        *[("ZDIFF", *args) for args in [("2", "a", "b"), ("2", "b", "a", "WITHSCORES"),
                                          ("1", "a", "WITHSCORES"), ("2", "nokey", "a"),
                                          ("2", "a", "a"), ("3", "b", "nokey", "c")]],
        *[("ZINTERCARD", *args) for args in [("2", "a", "b"), ("2", "a", "b", "LIMIT", "1"),
                                               ("2", "a", "b", "LIMIT", "0"), ("1", "nokey"),
                                               ("3", "a", "b", "c", "limit", "100")]],
        ("ZUNIONSTORE", "u", "3", "a", "b", "c", "WEIGHTS", "1", "2", "3"),
        ("ZRANGE", "u", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "u"),
        ("ZINTERSTORE", "h", "2", "a", "b", "AGGREGATE", "MAX"),  # replaces a hash
        ("TYPE", "h"),
        ("ZRANGE", "h", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "u", "2", "a", "nokey"),  # empty: the key goes
        ("EXISTS", "u"),
        ("ZDIFFSTORE", "u", "2", "b", "a"),
        ("ZRANGE", "u", "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", "a", "2", "a", "b"),  # in place
        ("ZRANGE", "a", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "nothing", "1", "nokey"),
        ("EXISTS", "nothing"),
        ("ZADD", "long", "1", "x" * 65),
        ("ZUNIONSTORE", "u", "2", "b", "long"),
        ("OBJECT", "ENCODING", "u"),
    ],
    "pops": [
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"),
        ("ZADD", "b", "5", "p", "6", "q"),
        ("HSET", "h", "f", "v"),
        *[("ZMPOP", *args) for args in [("0", "a", "MIN"), ("x", "a", "MIN"),
                                          ("-1", "a", "MIN"), ("1", "a"), ("2", "a", "MIN"),
                                          ("1", "a", "MID"), ("1", "a", "MIN", "COUNT"),
                                          ("1", "a", "MIN", "COUNT", "0"),
                                          ("1", "a", "MIN", "COUNT", "x"),
                                          ("1", "a", "MIN", "COUNT", "-1"),
                                          ("1", "a", "MIN", "COUNT", "1", "COUNT", "1"),
                                          ("1", "a", "MIN", "foo"),
                                          ("1", "h", "MIN"), ("2", "nokey", "h", "MAX"),
                                          ("2", "nokey", "nokey2", "MIN"),
                                          ("1", "a", "max"),
                                          ("2", "nokey", "a", "min", "count", "1"),
                                          ("2", "a", "h", "MIN", "COUNT", "10"),
                                          ("1", "a", "MIN")]],
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"),
        *[("BZMPOP", *args) for args in [("x", "1", "a", "MIN"), ("-1", "1", "a", "MIN"),
                                           ("0", "0", "a", "MIN"), ("0", "1", "a", "MID"),
                                           ("-1", "0", "a", "MIN"), ("inf", "1", "a", "MIN"),
                                           ("0", "1", "h", "MIN"),
                                           ("0", "1", "a", "MAX", "COUNT", "2"),
                                           ("0.1", "2", "nokey", "a", "MIN", "COUNT", "5")]],
        ("ZADD", "a", *[x for i in range(8) for x in (str(i), f"m{i}")]),
        *[(cmd, *args) for cmd in ("BZPOPMIN", "BZPOPMAX")
          for args in [("a", "x"), ("a", "-1"), ("a", ""), ("a", " 1"), ("a", "1 "),
                       ("a", "nan"), ("a", "inf"), ("a", "-inf"), ("a", "1e300"),
                       ("h", "0"), ("nokey", "h", "0"), ("a", "h", "0"),
                       ("nokey", "b", "0"), ("a", "0x10"), ("a", "0")]],
        ("EXISTS", "b"),
    ],
    "pops inside MULTI": [  # a blocking pop does not wait in a transaction
        ("MULTI",),
        ("BZPOPMIN", "nokey", "0"),
        ("BZMPOP", "0", "1", "nokey", "MIN"),
        ("ZADD", "a", "1", "x"),
        ("BZPOPMAX", "nokey", "a", "0"),
        ("BZMPOP", "10", "1", "a", "MIN"),
        ("ZMPOP", "1", "a", "MIN"),
        ("EXEC",),
    ],
    "zrangestore": [
        ("ZADD", "s", "1", "a", "2", "b", "3", "c", "4", "d", "0", "e"),
        ("HSET", "h", "f", "v"),
        *[("ZRANGESTORE", "d", *args) for args in [
            ("s", "0", "-1"), ("s", "1", "2"), ("s", "(1", "3", "BYSCORE"),
            ("s", "3", "(1", "BYSCORE", "REV"), ("s", "-", "+", "BYLEX", "LIMIT", "1", "2"),
            ("s", "0", "-1", "WITHSCORES"), ("s", "0", "-1", "LIMIT", "0", "1"),
            ("s", "x", "1"), ("s", "0", "1", "BYLEX"), ("h", "0", "-1"),
            ("nokey", "0", "-1"), ("s", "5", "10"), ("s", "-inf", "+inf", "BYSCORE", "REV"),
            ("s", "0", "-1", "REV", "BYSCORE", "LIMIT", "1", "1")]],
        ("ZADD", "d", "9", "z"),
        ("ZRANGESTORE", "d", "s", "1", "2"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "d", "s", "9", "10"),
        ("EXISTS", "d"),
        ("ZRANGESTORE", "s", "s", "1", "2"),  # in place
        ("ZRANGE", "s", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "h", "s", "0", "-1"),
        ("TYPE", "h"),
        ("OBJECT", "ENCODING", "h"),
    ],
    "zremrangebylex": [
        ("ZADD", "z", *[x for m in ("a", "b", "bb", "c", "d", "", "\xff") for x in ("0", m)]),
        ("ZREMRANGEBYLEX", "z", "x", "+"),
        ("ZREMRANGEBYLEX", "z", "-", "x"),
        ("ZREMRANGEBYLEX", "nokey", "-", "+"),
        ("ZREMRANGEBYLEX", "z", "(b", "[c"),
        ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYLEX", "z", "+", "-"),
        ("ZREMRANGEBYLEX", "z", "[\xff", "+"),
        ("ZREMRANGEBYLEX", "z", "-", "+"),
        ("EXISTS", "z"),
        ("HSET", "h", "f", "v"),
        ("ZREMRANGEBYLEX", "h", "-", "+"),
        ("ZREMRANGEBYLEX", "h", "x", "+"),
        ("ZADD", "mixed", "0", "c", "1", "a", "2", "d", "3", "b"),
        ("ZREMRANGEBYLEX", "mixed", "[b", "[c"),
        ("ZRANGE", "mixed", "0", "-1", "WITHSCORES"),
    ],
    "hincrbyfloat": [
        ("HINCRBYFLOAT", "h", "f", "0.1"),
        ("HINCRBYFLOAT", "h", "f", "0.2"),
        ("HINCRBYFLOAT", "h", "f", "-0.3"),
        ("HINCRBYFLOAT", "h", "f", "-0"),
        ("HINCRBYFLOAT", "h", "g", "1e17"),
        ("HINCRBYFLOAT", "h", "g", "1.5"),
        ("HINCRBYFLOAT", "h", "g", "1e308"),
        ("HINCRBYFLOAT", "h", "g", "1e308"),
        ("HINCRBYFLOAT", "h", "i", "5.0e3"),
        ("HINCRBYFLOAT", "h", "i", "0x10"),
        ("HINCRBYFLOAT", "h", "i", "0x1.8p-1"),
        ("HINCRBYFLOAT", "h", "j", "1e-20"),
        ("HINCRBYFLOAT", "h", "k", "-1e-20"),
        ("HINCRBYFLOAT", "h", "l", "3.0000000000000004"),
        ("HINCRBYFLOAT", "h", "m", "123456789012345678901234567890"),
        ("HINCRBYFLOAT", "h", "n", "4.9e-4951"),
        *[("HINCRBYFLOAT", "h", "x", bad) for bad in
          ("", " 1", "1 ", "x", "nan", "inf", "-inf", "+inf", "infinity", "1e5000", "1e-5000",
           "1,5", "0x", "1e", "1\x00", "--1", "+-1", ".", "e5")],
        ("HINCRBYFLOAT", "h", "o", "+.5"),
        ("HINCRBYFLOAT", "h", "o", "5."),
        ("HSET", "h", "bad", "abc", "sp", " 1", "inf", "inf", "big", "1e4932", "int", "-12"),
        *[("HINCRBYFLOAT", "h", f, "1") for f in ("bad", "sp", "inf", "big", "int")],
        ("HINCRBYFLOAT", "h", "big", "1e4932"),
        ("ZADD", "z", "1", "m"),
        ("HINCRBYFLOAT", "z", "f", "1"),
        ("HINCRBYFLOAT", "z", "f", "x"),
        ("HINCRBYFLOAT", "z", "f", "inf"),
        ("HINCRBYFLOAT", "fresh", "f", "inf"),
        ("EXISTS", "fresh"),
        ("HMGET", "h", *"fghijklmno"),  # a hashtable now (a long value): HGETALL's order is its own
    ],
    "random members, deterministic": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"),
        ("HSET", "h", "f1", "v1", "f2", "v2", "f3", "v3"),
        *[(cmd, key, *args) for cmd, key, word in [("ZRANDMEMBER", "z", "WITHSCORES"),
                                                     ("HRANDFIELD", "h", "WITHVALUES")]
          for args in [("0",), ("3",), ("100",), ("3", word), ("100", word.lower()),
                       ("x",), ("1.5",), ("-9223372036854775808",), ("9223372036854775808",),
                       ("9223372036854775807",), ("0", word),
                       ("-4611686018427387904", word), ("4611686018427387904", word),
                       ("4611686018427387903", word), ("1", "foo"), ("1", word, word),
                       ("x", "foo")]],
        ("ZRANDMEMBER", "nokey"), ("HRANDFIELD", "nokey"),
        ("ZRANDMEMBER", "nokey", "5"), ("HRANDFIELD", "nokey", "-5", "WITHVALUES"),
        ("ZRANDMEMBER", "h"), ("HRANDFIELD", "z"), ("ZRANDMEMBER", "h", "1"),
        ("HRANDFIELD", "z", "x"), ("HRANDFIELD", "z", "1", "foo"),
        ("ZADD", "one", "5", "only"), ("HSET", "lone", "f", "v"),
        ("ZRANDMEMBER", "one"), ("ZRANDMEMBER", "one", "-3", "WITHSCORES"),
        ("HRANDFIELD", "lone"), ("HRANDFIELD", "lone", "-2", "WITHVALUES"),
        ("HRANDFIELD", "lone", "1", "WITHVALUES"),
    ],
    "ttl and keys": [
        ("HSET", "h", "f", "v"),
        ("ZADD", "z", "1", "m"),
        *[(cmd, key) for cmd in ("TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST")
          for key in ("h", "z", "nokey")],
        ("TOUCH", "h", "z", "nokey", "h"),
        ("TOUCH", "nokey"),
        ("DEL", "z"),
        ("RANDOMKEY",),
        ("DEL", "h"),
        ("RANDOMKEY",),
        ("RANDOMKEY", "x"),
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_family_corners(emqd_port: int, redis_ref: int, name: str, resp: int) -> None:
    replay(emqd_port, redis_ref, resp, f"family {name!r} resp={resp}", CASES[name])
