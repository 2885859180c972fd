"""Shared by the persistence tests: random plans, keyspace dumps, files on disk."""

from __future__ import annotations

import random

import redis

from emqd.commit.plan import Op, Plan
from emqd.persist.load import load
from emqd.persist.records import joined, record
from emqd.store.keyspace import Keyspace
from tests.support import plain_value

Dump = dict[bytes, tuple[str, dict]]


def dump(keyspace: Keyspace) -> Dump:
    """Every key as ("hash", {field: value}) or ("zset", {member: score})."""
    return {key: plain_value(value) for key, value in keyspace.data.items()}


def dump_file(path: str) -> Dump:
    """The keyspace emqd holds after loading `path`."""
    space = Keyspace()
    loaded = load(path, space)
    assert loaded.torn_bytes == 0, loaded
    return dump(space)


def redis_dump(client: redis.Redis) -> Dump:
    """Every key of a redis-server, read with HGETALL / ZRANGE WITHSCORES."""
    out: Dump = {}
    for key in client.keys("*"):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = ("hash", client.hgetall(key))
        elif kind == "zset":
            out[key] = ("zset", dict(client.zrange(key, 0, -1, withscores=True)))
        else:
            raise AssertionError(f"unexpected {kind} at {key!r}")
    return out


def encode_records(records: list[list[Op]]) -> bytes:
    """Plans given as their ops, each as its record, in one string: a log's bytes."""
    return b"".join(joined(record(Plan(ops))) for ops in records)


def write_file(path: str, plans: list[list[Op]]) -> bytes:
    data = encode_records(plans)
    with open(path, "wb") as file:
        file.write(data)
    return data


class RandomPlans:
    """Valid plans over a few hashes and sorted sets, as commands would build them.

    Hash keys and sorted-set keys live under separate prefixes so that no plan
    meets WRONGTYPE; `n:` fields only ever hold integers, for HINCRBY.
    """

    SCORES = (0, 1, -1, 2.5, 1e-300, -7.25e18, 2**53 + 1, 1 / 3, float("inf"), float("-inf"))

    def __init__(self, seed: int, keys: int = 12) -> None:
        self.rng = random.Random(seed)
        self.hashes = [b"h:%d" % i for i in range(keys)]
        self.zsets = [b"z:%d" % i for i in range(keys // 2)]

    def value(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(4)
        if kind == 0:
            return b""
        if kind == 1:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        if kind == 2:
            return b"\r\n*3\r\n$4\r\nEXEC\r\n"  # RESP inside a value
        return b"%d" % rng.randrange(-10**6, 10**6)

    def op(self) -> Op:
        rng = self.rng
        choice = rng.randrange(100)
        if choice < 35:
            fields: list[bytes] = []
            for _ in range(rng.randrange(1, 4)):
                fields += [b"f%d" % rng.randrange(6), self.value()]
            return (b"HSET", rng.choice(self.hashes), *fields)
        if choice < 45:
            return (b"HDEL", rng.choice(self.hashes), b"f%d" % rng.randrange(6))
        if choice < 55:
            return (b"HINCRBY", rng.choice(self.hashes), b"n:%d" % rng.randrange(3),
                    rng.randrange(-5, 6))
        if choice < 80:
            pairs: list = []
            for _ in range(rng.randrange(1, 4)):
                score = rng.choice(self.SCORES) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
                pairs += [score, b"m%d" % rng.randrange(20)]
            return (b"ZADD", rng.choice(self.zsets), *pairs)
        if choice < 92:
            return (b"ZREM", rng.choice(self.zsets), b"m%d" % rng.randrange(20))
        if choice < 99:
            return (b"DEL", *rng.sample(self.hashes + self.zsets, rng.randrange(1, 3)))
        return (b"FLUSHALL",)

    def plan(self) -> list[Op]:
        return [self.op() for _ in range(self.rng.choice((1, 1, 1, 2, 3, 5)))]

    def plans(self, count: int) -> list[list[Op]]:
        return [self.plan() for _ in range(count)]
