"""MEMORY against the reference redis-server: syntax, arity, errors, missing keys and reply
shapes byte for byte; the byte counts, which differ by nature, for plausibility (MEMORY
USAGE grows with a value and is what INFO's used_memory grows by) and against Redis's."""

from __future__ import annotations

import pytest

from tests.differential.harness import Pair, parse
from tests.support import RawClient

pytestmark = pytest.mark.redis_reference

SAME = [
    ("MEMORY", "HELP"),
    ("MEMORY",),
    ("MEMORY", "nosuch"),
    ("MEMORY", "USAGE"),
    ("MEMORY", "USAGE", "missing"),
    ("MEMORY", "USAGE", "missing", "SAMPLES", "0"),
    ("MEMORY", "usage", "missing", "samples", "5"),
    ("MEMORY", "USAGE", "missing", "SAMPLES"),
    ("MEMORY", "USAGE", "missing", "SAMPLES", "x"),
    ("MEMORY", "USAGE", "missing", "SAMPLES", "-1"),
    ("MEMORY", "USAGE", "missing", "SAMPLES", "99999999999999999999"),
    ("MEMORY", "USAGE", "missing", "nosuch"),
    ("MEMORY", "USAGE", "missing", "SAMPLES", "1", "SAMPLES", "x"),
    ("MEMORY", "USAGE", "z", "SAMPLES", "x"),  # the options are read before the key
    ("MEMORY", "STATS", "x"),
    ("MEMORY", "DOCTOR", "x"),
    ("MEMORY", "PURGE"),
    ("MEMORY", "DOCTOR"),  # an instance with (almost) no data: Redis's own words
]


@pytest.mark.parametrize("resp", [2, 3])
def test_memory_answers_as_redis_does(emqd_port: int, redis_ref: int, resp: int) -> None:
    pair = Pair(emqd_port, redis_ref, resp, "memory")
    try:
        pair.same("ZADD", "z", "1", "a")
        for argv in SAME:
            pair.same(*argv)
    finally:
        pair.close()


def _shape(reply: object) -> object:
    """The field names of a map (or flat array) reply and the kind of each value."""
    kind, items = reply  # type: ignore[misc]
    flat = [value for _, value in items]
    kinds = [item[0] for item in items[1::2]]
    nested = [_shape(item) for item in items[1::2] if item[0] in (b"%", b"*")]
    return kind, flat[::2], kinds, nested


@pytest.mark.parametrize("resp", [2, 3])
def test_memory_stats_has_redis_s_fields_and_kinds(emqd_port: int, redis_ref: int,
                                                   resp: int) -> None:
    pair = Pair(emqd_port, redis_ref, resp, "memory stats")
    try:
        for keys in (False, True):  # db.0 appears with the first key
            if keys:
                pair.same("HSET", "h", "f", "v")
            mine, theirs = pair.both("MEMORY", "STATS")
            assert _shape(parse(mine)) == _shape(parse(theirs))
        mine, theirs = pair.both("MEMORY", "MALLOC-STATS")
        assert mine[:1] == theirs[:1]  # a verbatim text (jemalloc's report in Redis)
    finally:
        pair.close()


def _usage(client: RawClient, key: str) -> int:
    return int(parse(client.command("MEMORY", "USAGE", key))[1])


def _info(client: RawClient, field: str) -> int:
    text = parse(client.command("INFO", "memory"))[1].decode()
    return int(next(line.split(":")[1] for line in text.split("\r\n")
                    if line.startswith(field + ":")))


def test_usage_is_plausible_and_is_what_used_memory_grows_by(emqd_port: int,
                                                             redis_ref: int) -> None:
    emqd, redis_ = RawClient(emqd_port), RawClient(redis_ref)
    try:
        figures: dict[int, tuple[int, int]] = {}
        for members in (1, 4, 16, 128, 129, 1000):
            key = f"z{members}"
            before = _info(emqd, "used_memory")
            for client in (emqd, redis_):
                args: list[str] = []
                for i in range(members):
                    args += [str(i), f"member{i:05d}"]  # 11-byte members
                client.command("ZADD", key, *args)
            usage = _usage(emqd, key)
            assert _info(emqd, "used_memory") - before == usage  # one accounting
            figures[members] = usage, _usage(redis_, key)
        sizes = [mine for mine, _ in figures.values()]
        assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
        for members in (1, 4, 16, 128):  # listpacks: within issue 26's 2x of Redis's
            mine, theirs = figures[members]
            assert theirs / 2 < mine <= 2 * theirs, (members, mine, theirs)
        emqd.command("HSET", "h", "f", "v")
        small = _usage(emqd, "h")
        emqd.command("HSET", "h", "g", "x" * 1000)
        assert _usage(emqd, "h") >= small + 1000
        assert _info(emqd, "used_memory_dataset") > 0
        emqd.command("FLUSHALL")
        assert _info(emqd, "used_memory") == _info(emqd, "used_memory_startup")
    finally:
        emqd.close()
        redis_.close()
