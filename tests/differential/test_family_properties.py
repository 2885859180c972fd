"""Property tests of the new families against Redis: hypothesis draws the values.

- the set algebra: random sets (scores with infinities, -0, ties; shared and
  missing keys), random WEIGHTS (0, -1, inf among them) and AGGREGATE: every
  ZUNION / ZINTER / ZDIFF / ZINTERCARD reply byte for byte, every STORE's
  result and encoding too;
- the pops with COUNT: ZMPOP / BZMPOP over several keys, ZPOPMIN / ZPOPMAX,
  byte for byte, then what is left;
- HINCRBYFLOAT: random decimal texts added up in long double, byte for byte;
- the random members: ZRANDMEMBER / HRANDFIELD replies are random, so what is
  compared is their shape byte for byte (the reply's type and length, in RESP2
  and RESP3) and their properties: every member exists with its score or
  value, a positive count gives distinct ones, a count that covers the value
  gives exactly Redis's reply.

EMQD_FUZZ_EXAMPLES raises the number of examples (README).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.differential.harness import Pair, parse

pytestmark = pytest.mark.redis_reference

EXAMPLES = int(os.environ.get("EMQD_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

MEMBERS = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"", b"\xff", b"x" * 70])
SCORES = st.sampled_from(["0", "-0", "1", "-1", "2.5", "inf", "-inf", "1e308", "-1e308",
                          "0.1", "3", "1e-300", "7"])
WEIGHTS = st.sampled_from(["1", "0", "-1", "2", "0.5", "inf", "-inf", "-0", "1e308"])
KEYS = ["k1", "k2", "k3", "k4"]  # k4 is never written: a missing input


def zsets() -> st.SearchStrategy[dict[str, list[tuple[str, bytes]]]]:
    members = st.lists(st.tuples(SCORES, MEMBERS), max_size=6)
    return st.fixed_dictionaries({key: members for key in KEYS[:3]})


def _fill(pair: Pair, sets: dict[str, list[tuple[str, bytes]]]) -> None:
    pair.same("FLUSHALL")
    for key, pairs in sets.items():
        if pairs:
            pair.same("ZADD", key, *[x for score, member in pairs for x in (score, member)])


@st.composite
def algebra_requests(draw: Any) -> tuple[str, list[Any]]:
    op = draw(st.sampled_from(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE",
                               "ZDIFFSTORE", "ZINTERCARD"]))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    args: list[Any] = [len(keys), *keys]
    diff, card = op.startswith("ZDIFF"), op == "ZINTERCARD"
    if not diff and not card and draw(st.booleans()):
        args += ["WEIGHTS", *draw(st.lists(WEIGHTS, min_size=len(keys), max_size=len(keys)))]
    if not diff and not card and draw(st.booleans()):
        args += ["AGGREGATE", draw(st.sampled_from(["SUM", "MIN", "MAX", "max"]))]
    if card and draw(st.booleans()):
        args += ["LIMIT", draw(st.integers(0, 4))]
    if not op.endswith("STORE") and not card and draw(st.booleans()):
        args.append("WITHSCORES")
    if op.endswith("STORE"):
        args.insert(0, draw(st.sampled_from(["dst", "k1"])))
    return op, args


@pytest.mark.parametrize("resp", [2, 3])
@SETTINGS
@given(sets=zsets(), requests=st.lists(algebra_requests(), min_size=1, max_size=4))
def test_the_set_algebra_is_redis_s(emqd_port: int, redis_ref: int, resp: int,
                                    sets: dict[str, list[tuple[str, bytes]]],
                                    requests: list[tuple[str, list[Any]]]) -> None:
    pair = Pair(emqd_port, redis_ref, resp, label=f"algebra resp={resp}")
    try:
        _fill(pair, sets)
        for op, args in requests:
            pair.same(op, *args)
            if op.endswith("STORE"):
                pair.same("ZRANGE", args[0], "0", "-1", "WITHSCORES")
                pair.same("OBJECT", "ENCODING", args[0])
    finally:
        pair.close()


@st.composite
def pop_requests(draw: Any) -> list[Any]:
    op = draw(st.sampled_from(["ZMPOP", "BZMPOP", "ZPOPMIN", "ZPOPMAX"]))
    if op in ("ZPOPMIN", "ZPOPMAX"):
        count = draw(st.one_of(st.none(), st.integers(0, 8)))
        return [op, draw(st.sampled_from(KEYS[:3]))] + ([] if count is None else [count])
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    args: list[Any] = [len(keys), *keys, draw(st.sampled_from(["MIN", "MAX", "min"]))]
    if draw(st.booleans()):
        args += ["COUNT", draw(st.integers(1, 8))]
    # BZMPOP waits only when every key is empty: a short timeout keeps that brief
    return [op, *(["0.01"] if op == "BZMPOP" else []), *args]


@pytest.mark.parametrize("resp", [2, 3])
@SETTINGS
@given(sets=zsets(), requests=st.lists(pop_requests(), min_size=1, max_size=6))
def test_the_pops_with_count_are_redis_s(emqd_port: int, redis_ref: int, resp: int,
                                         sets: dict[str, list[tuple[str, bytes]]],
                                         requests: list[list[Any]]) -> None:
    pair = Pair(emqd_port, redis_ref, resp, label=f"pops resp={resp}")
    try:
        _fill(pair, sets)
        for request in requests:
            pair.same(*request)
        for key in KEYS:
            pair.same("ZRANGE", key, "0", "-1", "WITHSCORES")
    finally:
        pair.close()


DECIMALS = st.one_of(
    st.integers(0, 25).flatmap(
        lambda places: st.decimals(allow_nan=False, allow_infinity=False, places=places)
    ).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0.1", "-0.1", "1e-20", "1.5e300", "0x1p-3", "3.0000000000000004", "-0"]),
)


@SETTINGS
@given(increments=st.lists(DECIMALS, min_size=1, max_size=8))
def test_hincrbyfloat_adds_in_redis_s_long_double(emqd_port: int, redis_ref: int,
                                                  increments: list[str]) -> None:
    pair = Pair(emqd_port, redis_ref, label="hincrbyfloat")
    try:
        pair.same("FLUSHALL")
        for text in increments:
            pair.same("HINCRBYFLOAT", "h", "f", text)
        pair.same("HGET", "h", "f")
    finally:
        pair.close()


def _items(reply: bytes) -> tuple[bytes, list[Any]]:
    """The reply's type byte and its items' values (pairs kept as pairs)."""
    kind, value = parse(reply)
    if not isinstance(value, list):
        return kind, value
    return kind, [[v for _, v in item[1]] if item[0] == b"*" else item[1] for item in value]


@pytest.mark.parametrize("resp", [2, 3])
@SETTINGS
@given(size=st.integers(1, 140), count=st.integers(-300, 300), paired=st.booleans(),
       zset=st.booleans())
def test_random_members_have_redis_s_shape_and_properties(
        emqd_port: int, redis_ref: int, resp: int, size: int, count: int, paired: bool,
        zset: bool) -> None:
    """Shape byte for byte (type, length); every pick exists with its score or value;
    a positive count picks distinct ones; a count that covers the value answers it
    exactly as Redis does (a listpack's order is deterministic)."""
    random_members(emqd_port, redis_ref, resp, size, count, paired, zset)


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("zset", [True, False])
@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("count", [-5000, 1500, 2500])
def test_big_random_answers_are_streamed_as_redis_answers(
        emqd_port: int, redis_ref: int, resp: int, count: int, paired: bool,
        zset: bool) -> None:
    """Answers of reply.STREAM_MIN picks and more are made as the client reads them."""
    random_members(emqd_port, redis_ref, resp, 2000, count, paired, zset)


def random_members(emqd_port: int, redis_ref: int, resp: int, size: int, count: int,
                   paired: bool, zset: bool) -> None:
    pair = Pair(emqd_port, redis_ref, resp, label=f"random resp={resp}")
    try:
        pair.same("FLUSHALL")
        values = {b"m%d" % i: b"%d" % (i * 7 % 11) for i in range(size)}
        if zset:
            pair.same("ZADD", "k", *[x for m, s in values.items() for x in (s, m)])
            command, word = "ZRANDMEMBER", "WITHSCORES"
        else:
            pair.same("HSET", "k", *[x for m, v in values.items() for x in (m, v)])
            command, word = "HRANDFIELD", "WITHVALUES"
        argv = [command, "k", count] + ([word] if paired else [])
        mine, theirs = pair.both(*argv)
        kind, items = _items(mine)
        assert (kind, len(items)) == (lambda k, i: (k, len(i)))(*_items(theirs)), (mine, theirs)
        if paired and resp == 2:
            items = [items[i : i + 2] for i in range(0, len(items), 2)]
        names = [item[0] if paired else item for item in items]
        assert all(name in values for name in names)
        if paired:
            assert all(float(value) == float(values[name]) if zset else value == values[name]
                       for name, value in items)
        if count > 0:
            assert len(set(names)) == len(names) == min(count, size)
        else:
            assert len(names) == -count
        if count >= size and pair.encoding("k") == b"listpack":
            assert mine == theirs
        mine, theirs = pair.both(command, "k")
        assert parse(mine)[0] == parse(theirs)[0] and parse(mine)[1] in values
    finally:
        pair.close()
