"""store/sizes.py and `Keyspace.used`: the running total is the sum of MEMORY USAGE over
the keys whatever the writes, and the figures are what CPython really spends (tracemalloc)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.store import sizes
from emqd.store.hash import BigHash
from emqd.store.keyspace import Keyspace, key_bytes
from emqd.store.zset import ZSet

KEYS = st.sampled_from([b"h", b"hh", b"z", b"zz"])
NAMES = st.sampled_from(
    [b"a", b"b", b"%d" % 7, b"field", b"x" * 70] + [b"f%d" % i for i in range(40)])
VALUES = st.sampled_from([b"", b"1", b"12", b"v" * 30, b"w" * 600, b"u" * 5000])  # past ROW_MAX
SCORES = st.sampled_from([0, -0.0, 1, 2.5, 1e9])
OPS = st.one_of(
    st.tuples(st.just(b"HSET"), KEYS, NAMES, VALUES),
    # two fields, maybe one name twice (the last value stays): a Transition's cases
    st.tuples(st.just(b"HSET"), KEYS, NAMES, VALUES, NAMES, VALUES),
    st.tuples(st.just(b"HDEL"), KEYS, NAMES),
    st.tuples(st.just(b"HINCRBY"), KEYS, st.just(b"n"), st.just(3)),
    st.tuples(st.just(b"ZADD"), KEYS, SCORES, NAMES),
    st.tuples(st.just(b"ZREM"), KEYS, NAMES),
    st.tuples(st.just(b"DEL"), KEYS),
)


def _recount(space: Keyspace) -> int:
    """The keyspace's bytes worked out afresh, not from what any value keeps."""
    total = 0
    for key, value in space.data.items():
        total += sizes.key(key)
        if type(value) is bytes:  # a Row or a listpack set
            total += sizes.of_bytes(len(value))
        elif isinstance(value, ZSet):
            assert value.packed is None
            total += sizes.SKIPLIST + sum(sizes.member(len(m)) for m in value.keys)
        else:
            assert isinstance(value, BigHash)
            total += sizes.BIG_HASH + sum(sizes.field(n, v) for n, v in value.items())
    return total


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(OPS, max_size=80), entries=st.sampled_from([2, 128]))
def test_the_running_total_is_the_sum_of_every_key(ops: list[tuple], entries: int) -> None:
    space = Keyspace()
    space.limits.zset_entries = entries
    for op in ops:
        kind = space.type_name(op[1])
        if kind == "hash" and op[0].startswith(b"Z") or kind == "zset" and op[0].startswith(b"H"):
            continue  # WRONGTYPE: a command would have refused it
        if op[0] == b"HINCRBY" and kind == "hash":
            continue  # the field may hold a value that is not a number
        space.apply([op])
        assert space.used == _recount(space) == sum(key_bytes(space, k) or 0 for k in space.data)
    space.apply([(b"FLUSHALL",)])
    assert space.used == 0


def _measured(build: object, count: int) -> tuple[int, int]:
    """(what tracemalloc saw, what the keyspace counts) for `count` keys made by `build`."""
    space = Keyspace()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            build(space, i)  # type: ignore[operator]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, space.used


def _row(space: Keyspace, i: int) -> None:
    """A job's row, each value its own object as a request's are (a planner's constants,
    such as a state's name, are shared in fact: counted here all the same)."""
    space.apply([(b"HSET", b"emq:{q}:job:%d" % i, b"data", b"%0100d" % i, b"state",
                  b"pending%d" % i, b"attempts", b"0", b"at", b"%d" % (1_700_000_000_000 + i))])


def _zset(members: int, big: bool) -> object:
    def build(space: Keyspace, i: int) -> None:
        if big:
            space.limits.zset_entries = 0
        ops: list[object] = [b"ZADD", b"lane:%06d" % i]
        for m in range(members):
            ops += [float(m), b"member%05d" % m]
        space.apply([tuple(ops)])
    return build


def _big_hash(space: Keyspace, i: int) -> None:
    fields = [x for f in range(300) for x in (b"g%d" % f, b"1")]
    space.apply([(b"HSET", b"gactive:%d" % i, *fields)])


@pytest.mark.parametrize("build, count", [
    (_row, 3000),
    (_zset(1, False), 3000), (_zset(4, False), 3000), (_zset(16, False), 1000),
    (_zset(128, False), 200), (_zset(200, True), 50), (_zset(1, True), 1000),
    (_big_hash, 50),
])
def test_the_figures_are_what_cpython_spends(build: object, count: int) -> None:
    seen, counted = _measured(build, count)
    assert 0.75 * seen <= counted <= 1.3 * seen, (seen, counted)
