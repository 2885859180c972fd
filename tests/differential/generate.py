"""Seeded random hash and sorted-set commands, valid and invalid, for the differential tests.

Each generator yields (kind, argv) with `kind` telling the harness how to
compare (see harness.py). The argument pools are chosen to hit Redis's
corners: integers string2ll refuses (`01`, `+1`, ` 1`, `-0`, 2**63), scores
strtod reads oddly (`0x10`, `.5`, `inf`, `1e400`, `5e-324`, `-0`), range
bounds (`(`, empty, NUL bytes, `(inf`), lex items, glob patterns, cursors,
wrong arities and keys of the wrong type.

Sorted sets whose members hold different scores are never asked a lex range
when Redis holds them as a skiplist: Redis leaves that case undefined (its
answer depends on the skiplist's random levels), so there is nothing to
compare. Lex commands go to single-score sets, and to `z1`, which stays a
listpack, where Redis's answer is defined even with mixed scores.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from tests.differential.harness import EXACT, SCAN, UNORDERED

Command = tuple[str, tuple]

INTS = [b"0", b"1", b"-1", b"2", b"5", b"-5", b"100", b"9223372036854775807",
        b"-9223372036854775808", b"9223372036854775806", b"-9223372036854775807"]
BAD_INTS = [b"01", b"+1", b" 1", b"1 ", b"-0", b"1.5", b"abc", b"", b"9223372036854775808",
            b"-9223372036854775809", b"0x10", b"1e3", b"\x001"]
SCORES = [b"0", b"1", b"-1", b"2", b"3", b"1.5", b"-2.5", b"0.1", b"1e3", b"-0", b"+inf",
          b"-inf", b"inf", b"Infinity", b"1e308", b"5e-324", b"0x10", b"0x1p-3",
          b"3.0000000000000004", b"100", b"1e17", b"123456789012345678", b".5", b"5.", b"+2",
          b"1E2", b"-1e-5", b"4503599627370497"]
BAD_SCORES = [b"nan", b"-nan", b"abc", b"", b" 1", b"1 ", b"1e400", b"-1e400", b"1e-400",
              b"(1", b"1_0", b"0x", b"inf ", b"1e", b"\x00", b"1\x00"]
BOUNDS = [b"-inf", b"+inf", b"(1", b"1", b"(-inf", b"(+inf", b"(inf", b"1e400", b"(", b"",
          b"0", b"(0", b"1.5", b"(1.5", b"-1", b"3", b"(3", b"2", b"(2", b"-0", b"(-0", b"0x2",
          b" 2", b"1\x00x", b"100", b"(100", b"-inf", b"+inf", b"10", b"(10", b"-10", b"(-3",
          b"20", b"5", b"(5"]
BAD_BOUNDS = [b"nan", b"(nan", b"2 ", b"abc", b"[1", b"((1", b"1e"]
LEX = [b"-", b"+", b"[a", b"(a", b"[b", b"(b", b"[", b"(", b"[aa", b"(m5", b"[\xff", b"[m",
       b"(z", b"[m3", b"(m3", b"[c", b"(\x00"]
BAD_LEX = [b"a", b"", b"+x", b"-x", b"+\x00x", b"*"]
RANKS = [b"0", b"1", b"2", b"-1", b"-2", b"3", b"5", b"-5", b"100", b"-100", b"150", b"-150",
         b"9223372036854775807", b"-9223372036854775808"]
PATTERNS = [b"*", b"f*", b"*1", b"?", b"f?", b"[a-f]*", b"[^f]*", b"[f-a]?", b"\\f*", b"*\\",
            b"[", b"[]", b"[^]*", b"", b"**", b"m[0-3]", b"*[", b"[a-]*", b"a*b*c", b"?*",
            b"[\\]]*", b"m*", b"[\x80-\xff]*", b"*\x00*"]
CURSORS = [b"0"] * 12 + [b"1", b"17", b"", b"-1", b"+3", b"abc", b" 1", b"1 ",
                        b"18446744073709551615", b"18446744073709551616", b"0x0"]

FIELDS = [b"f", b"f1", b"f2", b"f3", b"f4", b"f5", b"", b"\x00", b"\xff\xfe", b"n", b"ab",
          "\u00e9".encode(), b"f 6", b"F"]
VALUES = [b"", b"v", b"1", b"-1", b"0", b"01", b"+1", b" 1", b"9223372036854775807",
          b"-9223372036854775808", b"9223372036854775806", b"abc", b"1.5", b"\x00\xff", b"10",
          b"-0"]
MEMBERS = [b"a", b"b", b"c", b"aa", b"ab", b"", b"\x00", b"\xff", b"A", b"z",
           *[b"m%d" % i for i in range(10)]]
LONG = b"L" * 70  # over 64 bytes: Redis leaves the compact encoding for good

# Keys by weight: mostly the right type and present, now and then missing or the other type.
HASH_KEYS = [b"h1"] * 4 + [b"h2"] * 3 + [b"hbig"] * 2 + [b"hlong"] * 2 + [b"missing", b"z1"]
ZSET_KEYS = [b"z1"] * 4 + [b"z2"] * 3 + [b"zbig"] * 3 + [b"zlex"] * 2 + [b"zlexbig"] * 2 + [
    b"missing", b"h1"]
LEX_KEYS = [b"z1"] * 3 + [b"zlex"] * 3 + [b"zlexbig"] * 3 + [b"missing", b"h1"]
ALL_KEYS = [b"h1", b"h2", b"hbig", b"hlong", b"missing", b"z1", b"z2", b"zbig", b"zlex",
            b"zlexbig"]


def render(value: Any) -> bytes:
    """A generated argument, or a logged op's value, as bytes on the wire: bytes as they
    are, str encoded, ints in decimal, floats as repr (as the append-only file writes them)."""
    if type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode()
    if type(value) is int:
        return b"%d" % value
    return repr(value).encode()


def setup() -> Iterator[tuple]:
    """Commands that give both servers the same starting keyspace."""
    yield ("FLUSHALL",)
    yield ("HSET", "h1", "f", "v", "f1", "1", "n", "9223372036854775806")
    yield ("HSET", "hbig", *[x for i in range(600) for x in (b"f%d" % i, b"%d" % i)])
    yield ("HSET", "hlong", "f", LONG, "f1", "1")
    yield ("ZADD", "z1", "1", "a", "2", "b", "2", "c", "-1", "m1", "0", "m2")
    yield ("ZADD", "zbig", *[x for i in range(140) for x in (b"%d" % (i % 37 - 10), b"m%d" % i)])
    yield ("ZADD", "zlex", *[x for m in (b"a", b"aa", b"b", b"c", b"m3", b"z") for x in (b"0", m)])
    yield ("ZADD", "zlexbig", *[x for i in range(200) for x in (b"0", b"m%d" % i)])


class Generator:
    """Random commands from one seed; `rng` decides everything, so a seed replays exactly."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, good: list, bad: list | None = None, bad_rate: float = 0.06) -> bytes:
        if bad and self.rng.random() < bad_rate:
            return self.rng.choice(bad)
        return self.rng.choice(good)

    def some(self, pool: list, low: int = 1, high: int = 4) -> list:
        return [self.rng.choice(pool) for _ in range(self.rng.randint(low, high))]

    def mutate(self, argv: tuple) -> tuple:
        """Now and then a wrong arity: one argument dropped or one added."""
        roll = self.rng.random()
        if roll < 0.03 and len(argv) > 1:
            return argv[:-1]
        if roll < 0.05:
            return (*argv, self.rng.choice([b"x", b"1", b"WITHSCORES", b"COUNT"]))
        return argv

    def value(self) -> bytes:
        return LONG if self.rng.random() < 0.02 else self.rng.choice(VALUES)

    # --- hashes ---------------------------------------------------------------
    def hash_command(self) -> Command:
        rng = self.rng
        key = rng.choice(HASH_KEYS)
        field = rng.choice(FIELDS)
        name = rng.choice(["HSET", "HSET", "HSETNX", "HMSET", "HGET", "HMGET", "HGETALL", "HDEL",
                           "HEXISTS", "HLEN", "HKEYS", "HVALS", "HINCRBY", "HINCRBY", "HSTRLEN",
                           "HSCAN", "HSCAN"])
        if name in ("HSET", "HMSET"):
            pairs = [x for _ in range(rng.randint(1, 3))
                     for x in (rng.choice(FIELDS), self.value())]
            if rng.random() < 0.1:
                pairs.pop()
            argv: tuple = (name, key, *pairs)
        elif name == "HSETNX":
            argv = (name, key, field, self.value())
        elif name in ("HGET", "HEXISTS", "HSTRLEN"):
            argv = (name, key, field)
        elif name in ("HMGET", "HDEL"):
            argv = (name, key, *self.some(FIELDS))
        elif name in ("HGETALL", "HLEN", "HKEYS", "HVALS"):
            argv = (name, key)
        elif name == "HINCRBY":
            argv = (name, key, field, self.pick(INTS, BAD_INTS, 0.2))
        else:
            return SCAN, self.scan_args(name, key)
        kind = UNORDERED if name in ("HGETALL", "HKEYS", "HVALS") else EXACT
        return kind, self.mutate(argv)

    def scan_args(self, name: str, key: bytes) -> tuple:
        rng = self.rng
        options: list[bytes] = []
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            roll = rng.random()
            if roll < 0.5:
                options += [rng.choice([b"MATCH", b"match"]), rng.choice(PATTERNS)]
            elif roll < 0.95:
                options += [b"COUNT", self.pick([b"1", b"2", b"5", b"10", b"1000"],
                                                [b"0", b"-1", b"x", b"01"], 0.3)]
            else:
                options += rng.choice([[b"TYPE", b"hash"], [b"NOPE"], [b"COUNT"], [b"MATCH"]])
        return (name, key, rng.choice(CURSORS), *options)

    # --- sorted sets ------------------------------------------------------------
    def member(self, key: bytes) -> bytes:
        if key == b"z2" and self.rng.random() < 0.03:
            return LONG
        if key == b"zlexbig":
            return b"m%d" % self.rng.randrange(220)
        return self.rng.choice(MEMBERS)

    def score(self, key: bytes) -> bytes:
        if key in (b"zlex", b"zlexbig"):
            return self.rng.choice([b"0", b"-0", b"0.0"])  # keep one score: lex stays defined
        return self.pick(SCORES, BAD_SCORES, 0.1)

    def zset_command(self) -> Command:
        rng = self.rng
        name = rng.choice(["ZADD"] * 6 + ["ZINCRBY"] * 2 + [
            "ZREM", "ZSCORE", "ZMSCORE", "ZCARD", "ZCOUNT", "ZRANGE", "ZRANGE", "ZRANGE", "ZRANGE",
            "ZRANGEBYSCORE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREVRANGE", "ZRANGEBYLEX",
            "ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT", "ZRANK", "ZREVRANK", "ZPOPMIN",
            "ZPOPMAX", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZSCAN", "ZSCAN"])
        lex = name in ("ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT")
        key = rng.choice(LEX_KEYS if lex else ZSET_KEYS)
        if name == "ZADD":
            argv: tuple = (name, key, *self.zadd_flags(),
                           *[x for _ in range(rng.choice([1, 1, 2, 3]))
                             for x in (self.score(key), self.member(key))])
            if rng.random() < 0.05:
                argv = argv[:-1]
        elif name == "ZINCRBY":
            argv = (name, key, self.score(key), self.member(key))
        elif name in ("ZREM", "ZMSCORE"):
            argv = (name, key, *[self.member(key) for _ in range(rng.randint(1, 3))])
        elif name in ("ZSCORE", "ZRANK", "ZREVRANK"):
            argv = (name, key, self.member(key))
        elif name == "ZCARD":
            argv = (name, key)
        elif name == "ZCOUNT":
            argv = (name, key, self.pick(BOUNDS, BAD_BOUNDS), self.pick(BOUNDS, BAD_BOUNDS))
        elif name == "ZREMRANGEBYSCORE":  # narrow mostly, so the sets do not drain
            low = rng.randint(-12, 25)
            argv = (name, key, self.pick([b"%d" % low, b"(%d" % low], BAD_BOUNDS),
                    self.pick([b"%d" % (low + rng.randint(0, 2)), b"(%d" % (low + 1)], BAD_BOUNDS))
        elif name == "ZLEXCOUNT":
            argv = (name, key, self.pick(LEX, BAD_LEX), self.pick(LEX, BAD_LEX))
        elif name == "ZREMRANGEBYRANK":
            start = rng.randint(-8, 8)
            end = b"%d" % (start + rng.randint(-1, 2)) if rng.random() < 0.9 else self.rank()
            argv = (name, key, self.pick([b"%d" % start], BAD_INTS), end)
        elif name == "ZREVRANGE":
            argv = (name, key, self.rank(), self.rank())
            if name == "ZREVRANGE" and rng.random() < 0.5:
                argv += (b"WITHSCORES",)
        elif name in ("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"):
            argv = (name, key, self.pick(BOUNDS, BAD_BOUNDS), self.pick(BOUNDS, BAD_BOUNDS),
                    *self.range_options([b"WITHSCORES", b"LIMIT"]))
        elif name in ("ZRANGEBYLEX", "ZREVRANGEBYLEX"):
            argv = (name, key, self.pick(LEX, BAD_LEX), self.pick(LEX, BAD_LEX),
                    *self.range_options([b"LIMIT", b"LIMIT", b"LIMIT", b"LIMIT", b"WITHSCORES"]))
        elif name == "ZRANGE":
            argv = self.zrange(key)
        elif name in ("ZPOPMIN", "ZPOPMAX"):
            argv = (name, key)
            if rng.random() < 0.6:
                counts = [b"0", b"1", b"1", b"2", b"3"]
                argv += (self.pick(counts, [b"-1", b"x", b"01", b"200"], 0.2),)
        else:
            return SCAN, self.scan_args(name, key)
        return EXACT, self.mutate(argv)

    def rank(self) -> bytes:
        if self.rng.random() < 0.75:
            return b"%d" % self.rng.randint(-6, 6)
        return self.pick(RANKS, BAD_INTS)

    def zadd_flags(self) -> list[bytes]:
        rng = self.rng
        if rng.random() < 0.5:
            return []
        flags = [b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR", b"ch", b"incr", b"gt"]
        return [rng.choice(flags) for _ in range(rng.choice([1, 1, 2, 3]))]

    def limit(self) -> list[bytes]:
        return [b"LIMIT", self.pick([b"0", b"1", b"2", b"5", b"200"], [b"-1", b"x", b"01"], 0.2),
                self.pick([b"-1", b"0", b"1", b"2", b"3", b"-7", b"1000"], [b"x", b"1.0"], 0.1)]

    def range_options(self, choices: list[bytes]) -> list[bytes]:
        options: list[bytes] = []
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            option = self.rng.choice(choices)
            options += self.limit() if option == b"LIMIT" else [option]
        if self.rng.random() < 0.05:
            options.append(self.rng.choice([b"BOGUS", b"REV", b"BYSCORE", b"LIMIT"]))
        return options

    def zrange(self, key: bytes) -> tuple:
        rng = self.rng
        kind = rng.choice(["rank", "rank", "score", "score", "lex"])
        if kind == "lex" and key not in LEX_KEYS:
            key = rng.choice(LEX_KEYS)
        if kind == "rank":
            low, high = self.rank(), self.rank()
        elif kind == "score":
            low, high = self.pick(BOUNDS, BAD_BOUNDS), self.pick(BOUNDS, BAD_BOUNDS)
        else:
            low, high = self.pick(LEX, BAD_LEX), self.pick(LEX, BAD_LEX)
        groups: list[list[bytes]] = []
        if kind == "score":
            groups.append([rng.choice([b"BYSCORE", b"byscore"])])
        elif kind == "lex":
            groups.append([b"BYLEX"])
        if rng.random() < 0.4:
            groups.append([b"REV"])
        if rng.random() < (0.4 if kind != "lex" else 0.05):
            groups.append([b"WITHSCORES"])
        if rng.random() < (0.5 if kind != "rank" else 0.1):
            groups.append(self.limit())
        if rng.random() < 0.05:
            groups.append([rng.choice([b"REV", b"BYLEX", b"BYSCORE", b"BOGUS", b"LIMIT"])])
        rng.shuffle(groups)
        options = [option for group in groups for option in group]
        return ("ZRANGE", key, low, high, *options)
