"""store/keyspace.py: how a sorted set is born, as Redis 7.0's ZADD creates its key, and
how the two kinds of bytes value (a small hash's Row, a small set's listpack) stay apart.

Redis looks at the first member of the call only: a skiplist when
`zset-max-listpack-entries` is 0 or that member is longer than
`zset-max-listpack-value`, else a listpack that the later members convert as
they come. The difference shows in a -0 score, which a listpack stores as 0.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emqd import errors
from emqd.store.keyspace import Keyspace, add_member


def _space(entries: int = 128, value: int = 64) -> Keyspace:
    space = Keyspace()
    space.limits.zset_entries, space.limits.zset_value = entries, value
    return space


@pytest.mark.parametrize(("op", "entries", "listpack", "negative_zero"), [
    ((b"ZADD", b"z", -0.0, b"a", 1, b"b", 2, b"c"), 2, False, False),  # grown past 2: was 0
    ((b"ZADD", b"z", -0.0, b"a"), 0, False, True),  # no listpack at all: born a skiplist
    ((b"ZADD", b"z", 1, b"x" * 65, -0.0, b"a"), 128, False, True),  # a long first member
    ((b"ZADD", b"z", -0.0, b"a", 1, b"x" * 65), 128, False, False),  # long later: converted
    ((b"ZADD", b"z", 1, b"a", 2, b"a"), 1, True, False),  # one member, named twice
    ([b"ZADD", b"z", b"-0", b"a"], 128, True, False),  # the loader's ops: lists of bytes
])
def test_a_set_is_born_as_redis_makes_it(op: tuple, entries: int, listpack: bool,
                                         negative_zero: bool) -> None:
    space = _space(entries)
    space.apply([op])
    zset = space.zset(b"z")
    assert zset is not None and zset.listpack is listpack
    score = zset.score(b"a")
    assert score == 0 or score == 2  # `a` named twice keeps its last score
    assert (math.copysign(1.0, score) < 0) is negative_zero


def test_a_verb_s_single_member_follows_the_same_rule() -> None:
    space = _space(entries=0)
    add_member(space, b"z", -0.0, b"a")
    zset = space.zset(b"z")
    assert zset is not None and not zset.listpack
    add_member(space, b"y", 1, b"a")
    space.limits.zset_entries = 128
    add_member(space, b"w", 1, b"a")
    assert not space.zset(b"y").listpack and space.zset(b"w").listpack  # type: ignore[union-attr]


@pytest.mark.parametrize("op", [
    (b"ZADD", b"h", 1, b"a"), (b"ZREM", b"h", b"f"), (b"HSET", b"z", b"f", b"v"),
    (b"HDEL", b"z", b"a"), (b"HINCRBY", b"z", b"a", 1),
])
def test_an_op_on_the_other_kind_of_bytes_is_refused_whole(op: tuple) -> None:
    """A Row and a small set are both bytes. A plan never writes one as the other (its
    command refused WRONGTYPE first); an op of a damaged log that does is refused before
    it changes anything, so the loader reports the record instead of loading garbage."""
    space = _space()
    space.apply([(b"HSET", b"h", b"f", b"v"), (b"ZADD", b"z", 1, b"a")])
    assert type(space.data[b"h"]) is bytes and type(space.data[b"z"]) is bytes
    before, used = dict(space.data), space.used
    with pytest.raises(errors.ReplyError) as caught:
        space.apply([op])
    assert errors.WRONGTYPE == caught.value
    assert space.data == before and space.used == used
    assert space.type_name(b"h") == "hash" and space.type_name(b"z") == "zset"
    with pytest.raises(errors.ReplyError):
        space.zset(b"h")
    with pytest.raises(errors.ReplyError):
        space.hash(b"z")


@given(st.lists(st.sampled_from([
    b"1796355102047", b"1796355102048", b"0", b"-0", b"-17", b"1.5", b"007", b"1e3", b"inf",
    b"-inf", b"9007199254740991", b"9007199254740993", b"-9007199254740993",
    b"123456789012345678901234567890",
]) | st.integers(-(2**60), 2**60).map(lambda n: b"%d" % n), min_size=1, max_size=20))
def test_a_score_written_as_text_is_the_double_float_reads(texts: list[bytes]) -> None:
    """A plan writes times as text; add_member reads digits itself and remembers the
    last text. Whatever the order (a text repeated, two alternating, one past 2**53
    that `float()` rounds), each member's score is `float()` of its text, sign of 0
    included (a skiplist keeps -0)."""
    space = _space(entries=0)
    for i, text in enumerate(texts):
        add_member(space, b"z", text, b"m%d" % i)
    zset = space.zset(b"z")
    assert zset is not None
    for i, text in enumerate(texts):
        score = zset.score(b"m%d" % i)
        assert score == float(text) and math.copysign(1, score) == math.copysign(1, float(text))
