"""Both forms of a sorted set against a model: store/listpack.py (a small set held as one
bytes object) and the skiplist form (a dict and sorted lists), and the conversion between
them, as Redis converts (at the thresholds, never back).

Three sets take every step of the same random sequence: a ZSet born a listpack that
converts as Redis would, a ZSet born a skiplist, and the keyspace's own path, which
stores a listpack as its bytes and swaps in the skiplist it becomes. After each step
every read the planners and commands make must answer what the model answers.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.store import listpack as lp
from emqd.store.hash import Limits
from emqd.store.keyspace import Keyspace
from emqd.store.packed import PREFIX, pack
from emqd.store.zset import ZSet, skiplist

# Short members that share bytes (so a `find` meets false matches), one of exactly 254
# and 255 bytes (the two widths of a length), and the empty member.
MEMBERS = st.sampled_from([b"", b"a", b"aa", b"ab", b"b", b"ba", b"\x01", b"\x0b",
                           b"\xff", b"a\x01", b"x" * 254, b"y" * 255, b"m1", b"m11"])
SCORES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 1e300, -1e300, math.inf, -math.inf,
                          5e-324, 3.0, 7.0])
STEPS = st.lists(st.tuples(st.booleans(), MEMBERS, SCORES), max_size=60)


def _same(a: float | None, b: float | None) -> bool:
    """Equal, and of the same sign (so -0 is not 0)."""
    return a == b and (a is None or b is None or math.copysign(1, a) == math.copysign(1, b))


def _check(zset: ZSet, model: dict[bytes, float]) -> None:
    pairs = sorted((score, member) for member, score in model.items())
    order = [member for _, member in pairs]
    assert len(zset) == len(model)
    assert list(zset.members()) == order
    assert [m for _, m in zset] == order
    assert all(_same(s, t) for (s, _), (t, _) in zip(zset, pairs, strict=True))
    assert zset.first_member() == (order[0] if order else None)
    first = zset.first()
    assert first == (pairs[0] if pairs else None)
    assert first is None or _same(first[0], pairs[0][0])
    assert zset.head(3) == order[:3]
    for member, score in model.items():
        assert member in zset
        assert _same(zset.score(member), score)
        assert zset.rank(member) == order.index(member)
    assert b"absent" not in zset and zset.score(b"absent") is None
    for bound in (-math.inf, -1.0, 0.0, 2.5, 3.0, math.inf):
        below = [m for s, m in pairs if s < bound]
        upto = [m for s, m in pairs if s <= bound]
        assert zset.start_of(bound) == len(below)
        assert zset.end_of(bound) == len(upto)
        assert zset.due(bound, 2) == upto[:2]
    assert [m for _, m in zset.walk(1, 4, reverse=True)] == order[1:4][::-1]


def _set(model: dict[bytes, float], member: bytes, score: float, listpack: bool) -> None:
    """ZADD's effect: an equal score (0 and -0 are equal) changes nothing; a listpack
    writes -0 as 0."""
    if member not in model or model[member] != score:
        model[member] = 0.0 if listpack and score == 0 else score


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, entries=st.sampled_from([0, 1, 3, 8, 128]),
       value=st.sampled_from([0, 1, 64, 254, 300]))
def test_both_forms_answer_as_the_model(steps: list[tuple[bool, bytes, float]],
                                        entries: int, value: int) -> None:
    limits = Limits()
    limits.zset_entries, limits.zset_value = entries, value
    born_small, born_big = ZSet(), skiplist()
    space = Keyspace()
    space.limits = limits
    small: dict[bytes, float] = {}  # born_small's and the keyspace's members
    big: dict[bytes, float] = {}
    stored: dict[bytes, float] = {}
    small_listpack = stored_listpack = True
    for add, member, score in steps:
        if add:
            new = member not in small
            too_big = new and (len(small) >= entries or len(member) > value)
            if not stored:  # the key is born: a skiplist at once when no listpack may hold it
                stored_listpack = entries > 0 and len(member) <= value
            small_listpack = small_listpack and not too_big
            stored_listpack = stored_listpack and not too_big
            _set(small, member, score, small_listpack)
            _set(big, member, score, False)
            _set(stored, member, score, stored_listpack)
            assert born_small.add(member, score, limits) is new
            assert born_big.add(member, score, limits) is new
            space.apply([(b"ZADD", b"z", score, member)])
        else:
            there = small.pop(member, None) is not None
            big.pop(member, None)
            stored.pop(member, None)
            assert born_small.remove(member) is there
            assert born_big.remove(member) is there
            space.apply([(b"ZREM", b"z", member)])
        assert born_small.listpack is small_listpack and not born_big.listpack
        _check(born_small, small)
        _check(born_big, big)
        zset = space.zset(b"z")
        assert (zset is None) is (not stored)
        if zset is not None:
            assert zset.listpack is stored_listpack
            assert (type(space.data[b"z"]) is bytes) is stored_listpack  # stored as its bytes
            _check(zset, stored)


def test_a_listpack_converts_at_the_thresholds_and_never_back() -> None:
    limits = Limits()
    zset = ZSet()
    for i in range(limits.zset_entries):
        zset.add(b"m%d" % i, float(i), limits)
    assert zset.listpack and zset.packed is not None
    zset.add(b"one more", 0.5, limits)
    assert not zset.listpack and zset.packed is None
    for i in range(limits.zset_entries):
        zset.remove(b"m%d" % i)
    assert not zset.listpack and len(zset) == 1
    long = ZSet()
    long.add(b"x" * limits.zset_value, 1.0, limits)
    assert long.listpack
    long.add(b"x" * (limits.zset_value + 1), 1.0, limits)
    assert not long.listpack


def _sig(member: bytes) -> bytes:
    return bytes((lp.signature(member),))


def of_keys(sorted_keys: list[bytes]) -> bytes:
    """The bytes of a set whose packed keys are `sorted_keys` (ascending, distinct), built
    from the layout store/listpack.py documents, not from its code: the reference that
    its incremental adds and removals must reproduce."""
    def length(n: int) -> bytes:
        return bytes((n,)) if n < 255 else b"\xff" + n.to_bytes(4, "big")

    def backwards(n: int) -> bytes:
        return bytes((n,)) if n < 255 else n.to_bytes(4, "big") + b"\xff"

    members = [key[PREFIX:] for key in sorted_keys]
    return (length(len(sorted_keys)) + b"".join(_sig(member) for member in members)
            + b"".join(length(len(member)) + key + backwards(len(member))
                       for key, member in zip(sorted_keys, members, strict=True)))


def test_consecutive_decimal_ids_have_distinct_signatures() -> None:
    """A queue's job ids: any 256 in a row (across a change of length too) share none,
    so a search of a queue's set never walks to a wrong entry."""
    for first in (0, 1, 745, 9_900, 99_999_990, 60_635_118_000, 10**20 - 100):
        ids = [b"%d" % i for i in range(first, first + 256)]
        assert len({lp.signature(member) for member in ids}) == 256
    assert lp.signature(b"a") != lp.signature(b"b") != lp.signature(b"ab")
    assert lp.signature(b"xx12345678") == lp.signature(b"yy12345678")  # the last 8 only


def test_the_bytes_are_the_documented_layout() -> None:
    """A count, a signature byte per entry, then each entry as its length, packed key
    and length again."""
    raw = of_keys([pack(1.0, b"ab"), pack(2.0, b"y" * 255)])
    long = (255).to_bytes(4, "big")
    assert raw == (b"\x02" + _sig(b"ab") + _sig(b"y" * 255)
                   + b"\x02" + pack(1.0, b"ab") + b"\x02"
                   + b"\xff" + long + pack(2.0, b"y" * 255) + long + b"\xff")
    assert lp.count(raw) == 2 and lp.keys(raw) == [pack(1.0, b"ab"), pack(2.0, b"y" * 255)]
    many = of_keys([pack(float(i), b"%d" % i) for i in range(300)])
    assert many[:5] == b"\xff" + (300).to_bytes(4, "big") and lp.count(many) == 300
    assert lp.start(many) == 305 and lp.find(many, b"0") == 305
    assert lp.rank_of(many, b"150") == 150 and lp.rank_of(many, b"300") == -1


def _colliding(count: int) -> list[bytes]:
    """`count` members whose signatures are all one byte, so a find must tell them apart
    by their bytes (about one member in 256 shares any given signature)."""
    found: list[bytes] = []
    target = lp.signature(b"m0")
    i = 0
    while len(found) < count:
        member = b"m%d" % i
        if lp.signature(member) == target:
            found.append(member)
        i += 1
    return found


def test_members_that_share_a_signature_are_told_apart() -> None:
    """Every add, find and removal among members of one signature, at every rank."""
    members = _colliding(7)
    raw = lp.EMPTY
    for score, member in enumerate(members):
        raw = lp.added(raw, member, pack(float(score), member), 128, 64)
    assert raw[1:8] == _sig(members[0]) * 7
    for rank, member in enumerate(members):
        assert lp.rank_of(raw, member) == rank
        assert lp.member_at(raw, lp.find(raw, member)) == member
    # a new score moves one among them, and its signature moves with it
    raw = lp.added(raw, members[1], pack(10.0, members[1]), 128, 64)
    assert list(lp.members(raw)) == [members[0], *members[2:], members[1]]
    raw = lp.removed(raw, members[3])
    assert lp.rank_of(raw, members[3]) == -1 and lp.count(raw) == 6
    assert [lp.rank_of(raw, m) for m in list(lp.members(raw))] == list(range(6))


def test_a_member_found_inside_another_entry_is_not_taken_for_it() -> None:
    """`b` + its length byte also occurs inside `ab`'s entry; only a real entry counts."""
    raw = of_keys([pack(1.0, b"ab")])
    assert lp.find(raw, b"b") == -1
    raw = of_keys([pack(1.0, b"ab"), pack(2.0, b"b")])
    assert lp.member_at(raw, lp.find(raw, b"b")) == b"b"


def test_every_size_adds_last_finds_and_removes_first_as_a_rebuild_would() -> None:
    """Across the sizes where the search changes (a loop over the signatures up to 48, then
    `bytes.find`) and where the count grows from one byte to five, an add of a new last
    member, a find of every member (colliding signatures among them) and a removal of
    the first leave exactly the bytes `of_keys` builds for the same members."""
    colliding = _colliding(3)
    for size in (0, 1, 2, 3, 47, 48, 49, 50, 253, 254, 255, 256):
        names = [*colliding, *(b"n%d" % i for i in range(size))][:size]
        keys = [pack(float(i), name) for i, name in enumerate(names)]
        raw = of_keys(keys)
        for rank, name in enumerate(names):
            assert lp.rank_of(raw, name) == rank
        assert lp.rank_of(raw, b"absent") == -1
        new = pack(float(size), b"new")
        grown = lp.added(raw, b"new", new, 1000, 64)
        assert grown == of_keys([*keys, new])
        assert lp.rank_of(grown, b"new") == size
        first = pack(-1.0, b"first")
        assert lp.added(raw, b"first", first, 1000, 64) == of_keys([first, *keys])
        if names:
            assert lp.removed(raw, names[0]) == of_keys(keys[1:])
            assert lp.removed(raw, names[-1]) == of_keys(keys[:-1])
