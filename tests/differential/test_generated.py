"""Hundreds of generated hash and sorted-set commands, compared byte for byte with Redis.

Each case replays one seed (fixed, so a failure reproduces: the assertion
names the seed, the step and the commands before it) against emqd and the
reference redis-server, in RESP2 and in RESP3, then compares every key's
final content. See generate.py for what is generated and harness.py for the
few comparisons the protocol lets be order-free.
"""

from __future__ import annotations

import random

import pytest

from tests.differential.generate import ALL_KEYS, Generator, setup
from tests.differential.harness import EXACT, UNORDERED, Pair

pytestmark = pytest.mark.redis_reference

SEEDS = [1, 2, 3, 4, 5, 6]
STEPS = 350


def check_keyspace(pair: Pair) -> None:
    """Every key: same type, same length, same content (order-free where Redis's is)."""
    for key in ALL_KEYS:
        kind = pair.same("TYPE", key)
        if kind == b"+hash\r\n":
            pair.same("HLEN", key)
            pair.check(UNORDERED, ("HGETALL", key))
        elif kind == b"+zset\r\n":
            pair.same("ZRANGE", key, "0", "-1", "WITHSCORES")


def run(pair: Pair, steps: list) -> None:
    for argv in setup():
        pair.same(*argv)
    for kind, argv in steps:
        pair.check(kind, argv)
    check_keyspace(pair)


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("seed", SEEDS)
def test_hash_commands(emqd_port: int, redis_ref: int, seed: int, resp: int) -> None:
    gen = Generator(seed)
    pair = Pair(emqd_port, redis_ref, resp, label=f"hash seed={seed} resp={resp}")
    try:
        run(pair, [gen.hash_command() for _ in range(STEPS)])
    finally:
        pair.close()


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("seed", SEEDS)
def test_zset_commands(emqd_port: int, redis_ref: int, seed: int, resp: int) -> None:
    gen = Generator(1000 + seed)
    pair = Pair(emqd_port, redis_ref, resp, label=f"zset seed={1000 + seed} resp={resp}")
    try:
        run(pair, [gen.zset_command() for _ in range(STEPS)])
    finally:
        pair.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_mixed_commands(emqd_port: int, redis_ref: int, resp: int) -> None:
    """Hash and sorted-set commands interleaved on shared keys (WRONGTYPE both ways)."""
    gen = Generator(77)
    pair = Pair(emqd_port, redis_ref, resp, label=f"mixed seed=77 resp={resp}")
    steps = [gen.hash_command() if gen.rng.random() < 0.5 else gen.zset_command()
             for _ in range(STEPS)]
    try:
        run(pair, steps)
    finally:
        pair.close()


def test_exact_is_the_default_comparison() -> None:
    """The generator marks only the order-free reads as anything but EXACT."""
    gen = Generator(5)
    kinds = {name: kind for kind, (name, *_) in (gen.hash_command() for _ in range(500))}
    assert kinds["HGET"] == EXACT and kinds["HGETALL"] == UNORDERED


def random_glob(rng: random.Random, alphabet: bytes, length: int) -> bytes:
    return bytes(rng.choice(alphabet) for _ in range(rng.randint(0, length)))


@pytest.mark.parametrize("seed", [31, 32])
def test_generated_glob_patterns(emqd_port: int, redis_ref: int, seed: int) -> None:
    """Random patterns of glob's special bytes over random fields, through HSCAN MATCH."""
    rng = random.Random(seed)
    fields = {random_glob(rng, b"ab-]\\[^*?\x00\xff", 6) for _ in range(80)}
    pair = Pair(emqd_port, redis_ref, label=f"glob seed={seed}")
    try:
        pair.same("FLUSHALL")
        pair.same("HSET", "h", *[x for f in sorted(fields) for x in (f, b"1")])
        for _ in range(300):
            pair.same("HSCAN", "h", "0", "MATCH", random_glob(rng, b"ab-]\\[^*?\xff", 8))
    finally:
        pair.close()
