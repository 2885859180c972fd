"""The sorted-set type: members with float scores, ordered by (score, member).

A set has two forms, as in Redis. While Redis would hold it as a listpack (at
most `zset-max-listpack-entries` members of at most `zset-max-listpack-value`
bytes), it is one bytes object (store/listpack.py), which the keyspace stores as
the value itself; reading it through the keyspace wraps it in a ZSet whose
`packed` holds it. Past either bound it becomes a skiplist for good (Redis never
converts back): a dict maps each member to its *packed key* (store/packed.py:
9 bytes that sort as the score, then the member) for O(1) lookups, and one
sorted list of those keys (store/sorted.py) gives ranks and ranges. Both forms
order the same packed keys, so every read answers the same in either.

0 and -0 are equal scores, so both pack as +0; a skiplist remembers which
members hold -0 (`negative_zeros`) to answer them as Redis does, and a listpack
writes -0 as `0`, as Redis's does (it stores a score as text). The encoding
changes one more visible thing, so callers read `listpack`: ZSCAN returns a
listpack's whole content in one call. This type knows nothing of keys, types or
clients; `store/keyspace.py` does.

Score ranges are spans of ranks, `[start, stop)`, so a command can page
through them (LIMIT, REV) with one `islice`. Lexicographic ranges follow
Redis's listpack walk exactly (the first member >= min from the head, then on
while <= max): a bisect when all scores are equal, the only case Redis
defines; with mixed scores a scan that answers what Redis's listpack answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Final, final

from emqd.store import listpack as lp
from emqd.store import sizes
from emqd.store.hash import Limits
from emqd.store.packed import PREFIX, members_of, pack, score_of
from emqd.store.scan_index import ScanIndex
from emqd.store.sorted import SortedKeys

__all__ = ["PREFIX", "ZSet", "members_of", "pack", "score_of", "added_to", "skiplist"]

_DEFAULT_LIMITS: Final = Limits()


def _pairs(keys: Iterable[bytes],
           negative_zeros: set[bytes] | None) -> Iterator[tuple[float, bytes]]:
    for key in keys:
        score = score_of(key)
        member = key[PREFIX:]
        if negative_zeros and member in negative_zeros:
            score = -0.0
        yield score, member


def _bound(score: float) -> bytes:
    """The packed key of `score` with the empty member: below every member of that score."""
    return pack(score, b"")


def added_to(raw: bytes, member: bytes, score: float, limits: Limits) -> bytes | ZSet:
    """A listpack set (its bytes) after ZADD of `member`: its new bytes, or the skiplist
    it became (the keyspace stores either)."""
    new = lp.added(raw, member, pack(score, member), limits.zset_entries, limits.zset_value)
    if new:
        return new
    zset = ZSet(raw)
    zset.add(member, score, limits)
    return zset


def skiplist() -> ZSet:
    """An empty set in the skiplist form (a set born too big for a listpack)."""
    zset = ZSet()
    zset.convert()
    return zset


@final  # no subclass: `type(value) is ZSet` tells a set from the other values
class ZSet:
    """A sorted set. Contract: while `packed` is None (a skiplist), `_keys` and `_order`
    hold the same packed keys; while it is bytes (a listpack), both are None."""

    __slots__ = ("packed", "_keys", "_order", "negative_zeros", "scan", "nbytes")

    def __init__(self, packed: bytes = lp.EMPTY) -> None:
        self.packed: bytes | None = packed  # the listpack form, None once a skiplist
        self._keys: dict[bytes, bytes] | None = None  # member -> packed key (skiplist)
        self._order: SortedKeys | None = None  # the packed keys, sorted (skiplist)
        self.negative_zeros: set[bytes] | None = None  # members scored -0 (skiplist only)
        self.scan: ScanIndex | None = None  # while a ZSCAN runs on a big set (scan_index.py)
        self.nbytes = 0  # what a skiplist costs (store/sizes.py), kept as it changes

    def size(self) -> int:
        """The bytes this set costs as the store holds it (store/sizes.py)."""
        raw = self.packed
        if raw is not None:  # a listpack in a ZSet of its own: the object and its bytes
            return sizes.WRAPPER + sizes.of_bytes(len(raw))
        return self.nbytes

    @property
    def listpack(self) -> bool:
        """Redis would hold this set as a listpack (OBJECT ENCODING, ZSCAN)."""
        return self.packed is not None

    @property
    def keys(self) -> dict[bytes, bytes]:
        """member -> packed key (a fresh dict of a listpack)."""
        keys = self._keys
        if keys is None:
            return {key[PREFIX:]: key for key in lp.keys(self._raw())}
        return keys

    @property
    def order(self) -> SortedKeys:
        """The packed keys in order (a fresh copy of a listpack's)."""
        order = self._order
        if order is None:
            return SortedKeys.of(lp.keys(self._raw()))
        return order

    def _raw(self) -> bytes:
        raw = self.packed
        assert raw is not None
        return raw

    def _big(self) -> dict[bytes, bytes]:
        keys = self._keys
        assert keys is not None
        return keys

    def _sorted(self) -> SortedKeys:
        order = self._order
        assert order is not None
        return order

    def convert(self) -> None:
        """Become a skiplist (Redis's zsetConvert), for good."""
        raw = self.packed
        if raw is None:
            return
        keys = lp.keys(raw)
        self._keys = {key[PREFIX:]: key for key in keys}
        self._order = SortedKeys.of(keys)
        self.packed = None
        nbytes = sizes.SKIPLIST
        for key in keys:
            nbytes += sizes.member(len(key) - PREFIX)
        self.nbytes = nbytes

    def __len__(self) -> int:
        raw = self.packed
        if raw is not None:
            return lp.count(raw)
        return len(self._big())

    def __contains__(self, member: bytes) -> bool:
        raw = self.packed
        if raw is not None:
            return lp.rank_of(raw, member) >= 0
        return member in self._big()

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        return self.pairs(self.order)

    def pairs(self, keys: Iterator[bytes] | SortedKeys) -> Iterator[tuple[float, bytes]]:
        """(score, member) of each packed key, as the commands see them."""
        return _pairs(keys, self.negative_zeros)

    def score(self, member: bytes) -> float | None:
        raw = self.packed
        if raw is not None:
            off = lp.find(raw, member)
            return None if off < 0 else lp.score_of_entry(raw, off)
        key = self._big().get(member)
        if key is None:
            return None
        if self.negative_zeros and member in self.negative_zeros:
            return -0.0
        return score_of(key)

    def add(self, member: bytes, score: float, limits: Limits = _DEFAULT_LIMITS) -> bool:
        """Set `member`'s score (not NaN). True when the member is new.

        An equal score (0 and -0 are equal) leaves the member as it is, as
        Redis does. A listpack-encoded set stores -0 as 0; one that must
        become a skiplist for the new member converts first, so that member
        keeps its -0 as a skiplist does.
        """
        raw = self.packed
        if raw is not None:
            new = lp.added(raw, member, pack(score, member), limits.zset_entries,
                           limits.zset_value)
            if new:
                self.packed = new
                return lp.count(new) > lp.count(raw)
            self.convert()
        keys = self._big()
        order = self._sorted()
        new_key = pack(score, member)
        old = keys.get(member)
        if old is not None:
            if old == new_key:
                return False
            order.remove(old)
        keys[member] = new_key
        order.add(new_key)
        if score == 0:
            self._note_zero(member, math.copysign(1.0, score) < 0)
        elif self.negative_zeros:
            self.negative_zeros.discard(member)
        if old is None:
            self.nbytes += sizes.member(len(member))
            if self.scan is not None:
                self.scan = self.scan.added(member)
        return old is None

    def _note_zero(self, member: bytes, negative: bool) -> None:
        if negative:
            if self.negative_zeros is None:
                self.negative_zeros = set()
            self.negative_zeros.add(member)
        elif self.negative_zeros:
            self.negative_zeros.discard(member)

    def remove(self, member: bytes) -> bool:
        """Remove `member`. True when it was there."""
        raw = self.packed
        if raw is not None:
            new = lp.removed(raw, member)
            self.packed = new
            return new is not raw
        key = self._big().pop(member, None)
        if key is None:
            return False
        self._sorted().remove(key)
        self.nbytes -= sizes.member(len(member))
        if self.negative_zeros:
            self.negative_zeros.discard(member)
        if self.scan is not None:
            self.scan = self.scan.removed(member)
        return True

    def first(self) -> tuple[float, bytes] | None:
        """The (score, member) pair ZPOPMIN would take, without taking it."""
        raw = self.packed
        if raw is not None:
            if raw == lp.EMPTY:
                return None
            off = lp.start(raw)
            return lp.score_of_entry(raw, off), lp.member_at(raw, off)
        if not self._big():
            return None
        key = self._sorted().first()
        member = key[PREFIX:]
        if self.negative_zeros and member in self.negative_zeros:
            return -0.0, member
        return score_of(key), member

    def first_member(self) -> bytes | None:
        """The member ZPOPMIN would take (CLAIM's read: no score to decode)."""
        raw = self.packed
        if raw is not None:
            return None if raw == lp.EMPTY else lp.member_at(raw, lp.start(raw))
        return self._sorted().first()[PREFIX:] if self._big() else None

    def members(self) -> Iterator[bytes]:
        """Every member in order, lazily (a walk that may stop early costs what it visits).

        A `map` or a generator function, not a generator expression: mypyc compiles
        a returned generator expression as a list, which made every CLAIM copy its
        whole `pending`.
        """
        raw = self.packed
        if raw is not None:
            return lp.members(raw)
        return members_of(self._sorted())

    def span(self, start: int, stop: int, reverse: bool = False) -> list[bytes]:
        """The packed keys of ranks `[start, stop)`, ascending or descending: a snapshot
        (a list of references) that later writes to the set do not change."""
        return list(self.order.islice(start, stop, reverse=reverse))

    def pairs_of(self, keys: list[bytes]) -> Iterator[tuple[float, bytes]]:
        """(score, member) of a `span` snapshot, lazily, with the members scored -0 as
        they are now (the set may change before the last pair is made)."""
        zeros = self.negative_zeros
        return _pairs(keys, set(zeros) if zeros else None)

    def head(self, count: int) -> list[bytes]:
        """The `count` lowest members, in order."""
        raw = self.packed
        if raw is not None:
            return lp.head(raw, count)
        return [key[PREFIX:] for key in self._sorted().islice(0, count)]

    def due(self, max_score: float, count: int) -> list[bytes]:
        """At most `count` members with score <= max_score, in order (due times, deadlines)."""
        raw = self.packed
        if raw is not None:
            above = None if math.isinf(max_score) and max_score > 0 else \
                _bound(math.nextafter(max_score, math.inf))
            return lp.head(raw, count, above)
        stop = min(self.end_of(max_score), count)
        return [key[PREFIX:] for key in self._sorted().islice(0, stop)]

    def rank(self, member: bytes) -> int | None:
        """`member`'s 0-based rank in ascending order, None when absent."""
        raw = self.packed
        if raw is not None:
            rank = lp.rank_of(raw, member)
            return None if rank < 0 else rank
        key = self._big().get(member)
        if key is None:
            return None
        return self._sorted().index(key)

    def walk(self, start: int, stop: int, reverse: bool = False) -> Iterator[tuple[float, bytes]]:
        """Pairs of ranks `[start, stop)`, ascending, or descending when `reverse`."""
        return self.pairs(self.order.islice(start, stop, reverse=reverse))

    # --- score ranges --------------------------------------------------------
    def _below(self, bound: bytes) -> int:
        """How many packed keys are below `bound`."""
        raw = self.packed
        if raw is not None:
            return lp.rank_below(raw, bound)
        return self._sorted().bisect_left(bound)

    def start_of(self, score: float, exclusive: bool = False) -> int:
        """The rank of the first pair whose score is >= score (> score when exclusive)."""
        if exclusive:
            if math.isinf(score) and score > 0:
                return len(self)
            return self._below(_bound(math.nextafter(score, math.inf)))
        return self._below(_bound(score))

    def end_of(self, score: float, exclusive: bool = False) -> int:
        """One past the rank of the last pair whose score is <= score (< score when exclusive)."""
        if exclusive:
            return self._below(_bound(score))
        if math.isinf(score) and score > 0:
            return len(self)
        return self._below(_bound(math.nextafter(score, math.inf)))

    def score_span(
        self, low: float, high: float, low_exclusive: bool = False, high_exclusive: bool = False
    ) -> tuple[int, int]:
        """The ranks `[start, stop)` of the pairs with low <= score <= high (bounds as asked)."""
        start = self.start_of(low, low_exclusive)
        stop = self.end_of(high, high_exclusive)
        return (start, stop) if start < stop else (start, start)

    # --- lexicographic ranges ------------------------------------------------
    def _one_score(self) -> bool:
        order = self.order
        return bool(order[0][:PREFIX] == order[-1][:PREFIX])

    def lex_first(self, lex: LexRange) -> int | None:
        """The rank ZRANGEBYLEX starts at: the first member >= min, if it is <= max."""
        order = self.order
        if not self._may_hold(lex):
            return None
        if self._one_score():  # the members are sorted: bisect
            first = _bisect_min(order, order[0][:PREFIX], lex)
        else:
            # _may_hold saw the last member >= min, so there is one
            first = next(i for i, key in enumerate(order) if lex.gte_min(key[PREFIX:]))
        return first if first < len(order) and lex.lte_max(order[first][PREFIX:]) else None

    def lex_last(self, lex: LexRange) -> int | None:
        """The rank ZREVRANGEBYLEX starts at: the last member <= max, if it is >= min."""
        order = self.order
        if not self._may_hold(lex):
            return None
        if self._one_score():
            last = _bisect_max(order, order[0][:PREFIX], lex) - 1
        else:
            top = len(order) - 1
            last = next(top - i for i, key in enumerate(reversed(order))
                        if lex.lte_max(key[PREFIX:]))
        return last if last >= 0 and lex.gte_min(order[last][PREFIX:]) else None

    def lex_count(self, lex: LexRange) -> int:
        """ZLEXCOUNT: members from `lex_first` on while they are <= max."""
        first = self.lex_first(lex)
        if first is None:
            return 0
        order = self.order
        if self._one_score():
            return max(0, _bisect_max(order, order[0][:PREFIX], lex) - first)
        count = 0
        for key in order.islice(first):
            if not lex.lte_max(key[PREFIX:]):
                break
            count += 1
        return count

    def _may_hold(self, lex: LexRange) -> bool:
        """Redis's zzlIsInLexRange: a non-empty range that overlaps [first, last] member."""
        order = self.order
        return bool(order) and not lex.empty() and lex.gte_min(order[-1][PREFIX:]) and \
            lex.lte_max(order[0][PREFIX:])


class _Infinity(Enum):
    """`-` and `+` in a lexicographic range: below and above every member. An enum, so
    that a bound tested against both is known to be bytes."""

    MINUS = "-"
    PLUS = "+"


MINUS_INF: Final = _Infinity.MINUS
PLUS_INF: Final = _Infinity.PLUS
LexBound = bytes | _Infinity


def _cmplex(a: LexBound, b: LexBound) -> int:
    """Redis's sdscmplex: bytes order, with `-` below and `+` above everything."""
    if a is b:
        return 0
    if a is MINUS_INF or b is PLUS_INF:
        return -1
    if a is PLUS_INF or b is MINUS_INF:
        return 1
    return (a > b) - (a < b)


@dataclass(frozen=True, slots=True)
class LexRange:
    """A ZRANGEBYLEX range: each bound a member (inclusive unless `*_exclusive`) or ±inf."""

    min: LexBound
    max: LexBound
    min_exclusive: bool = False
    max_exclusive: bool = False

    def empty(self) -> bool:
        cmp = _cmplex(self.min, self.max)
        return cmp > 0 or (cmp == 0 and (self.min_exclusive or self.max_exclusive))

    def gte_min(self, member: bytes) -> bool:
        cmp = _cmplex(member, self.min)
        return cmp > 0 if self.min_exclusive else cmp >= 0

    def lte_max(self, member: bytes) -> bool:
        cmp = _cmplex(member, self.max)
        return cmp < 0 if self.max_exclusive else cmp <= 0


def _bisect_min(order: SortedKeys, prefix: bytes, lex: LexRange) -> int:
    """Where members >= lex.min start, in a set whose keys all begin with `prefix`."""
    if lex.min is MINUS_INF:
        return 0
    if lex.min is PLUS_INF:
        return len(order)
    bound = prefix + lex.min
    return order.bisect_right(bound) if lex.min_exclusive else order.bisect_left(bound)


def _bisect_max(order: SortedKeys, prefix: bytes, lex: LexRange) -> int:
    """One past where members <= lex.max end, in a set whose keys all begin with `prefix`."""
    if lex.max is PLUS_INF:
        return len(order)
    if lex.max is MINUS_INF:
        return 0
    bound = prefix + lex.max
    return order.bisect_left(bound) if lex.max_exclusive else order.bisect_right(bound)
