"""The ZSet type API, directly: contracts of add/remove/rank/ranges, compactness, lex walks."""

from __future__ import annotations

import math
import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emqd.store.hash import Limits
from emqd.store.zset import MINUS_INF, PLUS_INF, LexRange, ZSet, pack, score_of

LISTPACK_ENTRIES = Limits().zset_entries

INF = math.inf


def zset(*pairs: tuple[float, bytes]) -> ZSet:
    z = ZSet()
    for score, member in pairs:
        z.add(member, score)
    return z


def consistent(z: ZSet) -> bool:
    """Both structures hold the same packed keys, and each key decodes to its member."""
    return (sorted(z.keys.values()) == list(z.order)
            and all(key.endswith(member) for member, key in z.keys.items()))


def test_add_reports_new_members_and_updates_in_place() -> None:
    z = ZSet()
    assert z.add(b"a", 2.0) is True
    assert z.add(b"a", 1.0) is False
    assert z.add(b"a", 1.0) is False
    assert z.score(b"a") == 1.0 and len(z) == 1 and consistent(z)


def test_order_is_score_then_member_bytes() -> None:
    z = zset((1, b"b"), (1, b"a"), (0, b"z"), (1, b"\xff"), (1, b""), (-INF, b"m"), (INF, b"n"))
    assert [m for _, m in z] == [b"m", b"z", b"", b"a", b"b", b"\xff", b"n"]
    assert z.first() == (-INF, b"m")
    assert [z.rank(m) for m in (b"m", b"a", b"n", b"nope")] == [0, 3, 6, None]


def test_remove() -> None:
    z = zset((1, b"a"), (2, b"b"))
    assert z.remove(b"a") is True and z.remove(b"a") is False
    assert list(z) == [(2, b"b")] and consistent(z)
    assert ZSet().first() is None


def test_compact_set_stores_negative_zero_as_zero_like_a_listpack() -> None:
    z = zset((-0.0, b"a"))
    assert math.copysign(1.0, z.score(b"a")) > 0
    z.add(b"b", 1.0)
    z.add(b"b", -0.0)  # an update in a listpack rewrites the score as text too
    assert math.copysign(1.0, z.score(b"b")) > 0


def test_set_leaves_compact_form_at_129_members_or_a_long_member_for_good() -> None:
    z = zset(*[(i, b"m%d" % i) for i in range(LISTPACK_ENTRIES)])
    assert z.listpack
    z.add(b"extra", -0.0)  # converting first, so the new member keeps -0 as a skiplist does
    assert not z.listpack and math.copysign(1.0, z.score(b"extra")) < 0
    for i in range(LISTPACK_ENTRIES):
        z.remove(b"m%d" % i)
    assert not z.listpack  # Redis never converts back
    long = zset((1, b"x" * 65))
    assert not long.listpack
    assert zset((1, b"x" * 64)).listpack


def test_equal_score_keeps_the_old_value_even_across_signed_zero() -> None:
    z = zset(*[(i, b"m%d" % i) for i in range(LISTPACK_ENTRIES + 1)])  # skiplist
    z.add(b"z", -0.0)
    assert z.add(b"z", 0.0) is False
    assert math.copysign(1.0, z.score(b"z")) < 0


@pytest.mark.parametrize(
    "low, high, low_ex, high_ex, members",
    [
        (-INF, INF, False, False, [b"a", b"b", b"c", b"d", b"e"]),
        (1, 2, False, False, [b"b", b"c", b"d"]),
        (1, 2, True, False, [b"c", b"d"]),
        (1, 2, False, True, [b"b"]),
        (1, 1, True, True, []),
        (2, 1, False, False, []),
        (INF, INF, False, False, [b"e"]),
        (INF, INF, True, False, []),
        (-INF, -INF, False, False, [b"a"]),
        (-INF, 1, True, True, []),
        (1.5, 1.75, False, False, []),
    ],
)
def test_score_span(low: float, high: float, low_ex: bool, high_ex: bool,
                    members: list[bytes]) -> None:
    z = zset((-INF, b"a"), (1, b"b"), (2, b"c"), (2, b"d"), (INF, b"e"))
    start, stop = z.score_span(low, high, low_ex, high_ex)
    assert start <= stop
    assert [m for _, m in z.walk(start, stop)] == members


def test_walk_forward_and_reverse() -> None:
    z = zset((1, b"a"), (2, b"b"), (3, b"c"))
    assert [m for _, m in z.walk(0, 3, reverse=True)] == [b"c", b"b", b"a"]
    assert list(z.walk(1, 3)) == [(2, b"b"), (3, b"c")]


def lex(low: object, high: object, low_ex: bool = False, high_ex: bool = False) -> LexRange:
    return LexRange(low, high, low_ex, high_ex)


@pytest.mark.parametrize(
    "r, first, last, count",
    [
        (lex(MINUS_INF, PLUS_INF, True, True), 0, 4, 5),
        (lex(b"b", b"c"), 1, 3, 3),
        (lex(b"b", b"c", True, False), 2, 3, 2),
        (lex(b"b", b"c", False, True), 1, 2, 2),
        (lex(b"bb", b"bb"), 2, 2, 1),
        (lex(b"bb", b"bb", True), None, None, 0),
        (lex(b"c", b"b"), None, None, 0),
        (lex(PLUS_INF, PLUS_INF, True, True), None, None, 0),
        (lex(b"", b"a"), 0, 0, 1),
        (lex(b"zz", PLUS_INF, False, True), None, None, 0),
        (lex(MINUS_INF, b"0", True), None, None, 0),
    ],
)
def test_lex_on_one_score_is_a_bisect(r: LexRange, first: int | None, last: int | None,
                                      count: int) -> None:
    z = zset(*[(0, m) for m in (b"a", b"b", b"bb", b"c", b"d")])
    assert (z.lex_first(r), z.lex_last(r), z.lex_count(r)) == (first, last, count)


def test_lex_with_mixed_scores_walks_like_a_listpack() -> None:
    # order: (0,c) (1,a) (2,d) (3,b): the walk starts at the first member >= min
    # from the head and stops at the first member > max.
    z = zset((0, b"c"), (1, b"a"), (2, b"d"), (3, b"b"))
    r = lex(b"b", b"c")
    assert z.lex_first(r) == 0 and z.lex_count(r) == 2  # c, a: a counts though < min
    assert z.lex_last(r) == 3  # from the tail: b
    assert z.lex_first(lex(b"a", b"a")) is None  # first >= a is c, which is > a


def test_random_operations_keep_both_structures_in_step() -> None:
    rng = random.Random(11)
    z = ZSet()
    model: dict[bytes, float] = {}
    for _ in range(3000):
        member = b"m%d" % rng.randrange(200)
        if rng.random() < 0.6:
            score = rng.choice([rng.randint(-5, 5), rng.random(), INF, -INF])
            assert z.add(member, score) == (member not in model)
            model[member] = score
        else:
            assert z.remove(member) == (model.pop(member, None) is not None)
    assert consistent(z)
    assert {m: z.score(m) for m in z.keys} == model
    expected = sorted((s, m) for m, s in model.items())
    assert [z.rank(m) for _, m in expected] == list(range(len(expected)))


@pytest.mark.parametrize("scores", [
    [-INF, -1e300, -2.5, -1.0, -5e-324, 0.0, 5e-324, 1.0, 2.5, 2**53, 1e300, INF],
])
def test_packed_keys_sort_as_the_scores_and_decode_back(scores: list[float]) -> None:
    keys = [pack(s, b"m") for s in scores]
    assert sorted(keys) == keys
    assert [score_of(k) for k in keys] == scores
    assert pack(-0.0, b"m") == pack(0.0, b"m")  # equal scores: one place in the order
    assert pack(1.0, b"a") < pack(1.0, b"b") < pack(1.0, b"ba") < pack(1.5, b"")


@given(st.lists(st.tuples(st.sampled_from([1.0, 2.5, 1e12, 0.0, -3.0]) | st.floats(
    allow_nan=False), st.binary(max_size=8)), max_size=30))
def test_pack_remembers_a_score_without_confusing_two(pairs: list[tuple[float, bytes]]) -> None:
    """pack keeps the last positive score's prefix: a run of keys, scores repeated or
    not, packs each as its own score and member would (the layout, computed apart)."""
    for score, member in pairs:
        if score > 0:
            expected = b"\x01" + struct.pack(">d", score) + member
        else:
            expected = pack(score, b"") + member  # 0 and negatives are not remembered
        assert pack(score, member) == expected
        assert score_of(pack(score, member)) == (0.0 if score == 0 else score)


def test_members_walks_lazily_from_the_front() -> None:
    """CLAIM reads `pending` through members() and stops at the first claimable job:
    the walk must not copy the set first (a compiled build once did, for every claim)."""
    zset = ZSet()
    for i in range(1000):
        zset.add(b"m%04d" % i, float(i))
    walk = zset.members()
    assert iter(walk) is walk  # an iterator, not a list of every member
    assert next(walk) == b"m0000" and next(walk) == b"m0001"
