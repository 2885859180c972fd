"""The sorted-set type: members with float scores, ordered by (score, member).

Each member is kept as one *packed key*: 9 bytes that sort as its score sorts,
then the member itself. Because bytes compare as memcmp, the packed keys of a
set sort exactly in Redis's order (score, then member bytes, which is also
ZPOPMIN's order), so one sorted list of packed keys (store/sorted.py) gives
ranks and ranges, and a dict maps each member to its packed key for O(1)
lookups. The
score lives once, inside the key: no float object, no (score, member) tuple per
member, which is what made a pending job cost more than it does in Redis.

The 9-byte prefix: `\\x01` and the IEEE-754 double big-endian for a score >= 0
(whose bit patterns already sort as the numbers do), `\\x00` and the same bytes
inverted for a negative one (which then sort the other way round, as needed).
0 and -0 are equal scores, so both pack as +0; a skiplist-encoded set
remembers which members hold -0 (`negative_zeros`) to answer them as Redis
does. This type knows nothing of keys, types or clients; `store/keyspace.py`
does.

`listpack` mirrors Redis's encoding of the set (OBJECT ENCODING; at most
`zset-max-listpack-entries` members of at most `zset-max-listpack-value`
bytes, and once outgrown never again). It changes two visible things, so emqd
keeps the flag to answer as Redis does: a listpack stores a score as text and
writes -0 as `0`, and ZSCAN returns a listpack's whole content in one call.

Score ranges are spans of ranks, `[start, stop)`, so a command can page
through them (LIMIT, REV) with one `islice`. Lexicographic ranges follow
Redis's listpack walk exactly (the first member >= min from the head, then on
while <= max): a bisect when all scores are equal, the only case Redis
defines; with mixed scores a scan that answers what Redis's listpack answers.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Final

from emqd.store.hash import Limits
from emqd.store.scan_index import ScanIndex
from emqd.store.sorted import SortedKeys

PREFIX: Final = 9  # bytes of a packed key before the member
_DOUBLE: Final = struct.Struct(">d")
_POSITIVE: Final = b"\x01"
_NEGATIVE: Final = b"\x00"
_INVERT: Final = bytes(255 - i for i in range(256))
_MEMBER = itemgetter(slice(PREFIX, None))  # a packed key's member
_DEFAULT_LIMITS: Final = Limits()


def pack(score: float, member: bytes) -> bytes:
    """The key that sorts as (score, member) sorts; -0 packs as 0, NaN is never given."""
    if score > 0:
        return _POSITIVE + _DOUBLE.pack(score) + member
    if score == 0:
        return _POSITIVE + _DOUBLE.pack(0.0) + member
    return _NEGATIVE + _DOUBLE.pack(score).translate(_INVERT) + member


def score_of(key: bytes) -> float:
    """The score a packed key holds (-0 comes back as 0)."""
    score: float
    if key[0]:
        (score,) = _DOUBLE.unpack_from(key, 1)
    else:
        (score,) = _DOUBLE.unpack(key[1:PREFIX].translate(_INVERT))
    return score


def members_of(keys: list[bytes]) -> Iterator[bytes]:
    """The members of packed keys, lazily, each sliced out in C (ZRANGE without scores)."""
    return map(_MEMBER, keys)


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


class ZSet:
    """A sorted set. Contract: `keys` and `order` always hold the same packed keys."""

    __slots__ = ("keys", "order", "listpack", "negative_zeros", "scan")

    def __init__(self) -> None:
        self.keys: dict[bytes, bytes] = {}  # member -> packed key
        self.order = SortedKeys()  # the packed keys, sorted
        self.listpack = True  # Redis would still hold this set as a listpack
        self.negative_zeros: set[bytes] | None = None  # members scored -0 (skiplist only)
        self.scan: ScanIndex | None = None  # while a ZSCAN runs on a big set (scan_index.py)

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, member: bytes) -> bool:
        return member in self.keys

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        return self.pairs(self.order)

    def pairs(self, keys: Iterator[bytes] | SortedKeys) -> Iterator[tuple[float, bytes]]:
        """(score, member) of each packed key, as the commands see them."""
        return _pairs(keys, self.negative_zeros)

    def score(self, member: bytes) -> float | None:
        key = self.keys.get(member)
        if key is None:
            return None
        if self.negative_zeros and member in self.negative_zeros:
            return -0.0
        return score_of(key)

    def add(self, member: bytes, score: float, limits: Limits = _DEFAULT_LIMITS) -> bool:
        """Set `member`'s score (not NaN). True when the member is new.

        An equal score (0 and -0 are equal) leaves the member as it is, as
        Redis does. A listpack-encoded set stores -0 as 0.
        """
        keys = self.keys
        new = pack(score, member)
        old = keys.get(member)
        if old is not None:
            if old == new:
                return False
            self.order.remove(old)
        elif self.listpack and (len(keys) >= limits.zset_entries
                                or len(member) > limits.zset_value):
            self.listpack = False
        keys[member] = new
        self.order.add(new)
        if score == 0 and not self.listpack:
            self._note_zero(member, math.copysign(1.0, score) < 0)
        elif self.negative_zeros:
            self.negative_zeros.discard(member)
        if self.scan is not None and old is None:
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
        key = self.keys.pop(member, None)
        if key is None:
            return False
        self.order.remove(key)
        if self.negative_zeros:
            self.negative_zeros.discard(member)
        if self.scan is not None:
            self.scan = self.scan.removed(member)
        return True

    def first(self) -> tuple[float, bytes] | None:
        """The (score, member) pair ZPOPMIN would take, without taking it."""
        if not self.keys:
            return None
        key = self.order.first()
        member = key[PREFIX:]
        if self.negative_zeros and member in self.negative_zeros:
            return -0.0, member
        return score_of(key), member

    def first_member(self) -> bytes | None:
        """The member ZPOPMIN would take (CLAIM's read: no score to decode)."""
        return self.order.first()[PREFIX:] if self.keys else None

    def members(self) -> Iterator[bytes]:
        """Every member in order, lazily (a walk that may stop early costs what it visits).

        A `map`, not a generator expression: mypyc compiles a returned generator
        expression as a list, which made every CLAIM copy its whole `pending`.
        """
        return map(_MEMBER, self.order)

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
        return [key[PREFIX:] for key in self.order.islice(0, count)]

    def due(self, max_score: float, count: int) -> list[bytes]:
        """At most `count` members with score <= max_score, in order (due times, deadlines)."""
        stop = min(self.end_of(max_score), count)
        return [key[PREFIX:] for key in self.order.islice(0, stop)]

    def rank(self, member: bytes) -> int | None:
        """`member`'s 0-based rank in ascending order, None when absent."""
        key = self.keys.get(member)
        if key is None:
            return None
        return self.order.index(key)

    def walk(self, start: int, stop: int, reverse: bool = False) -> Iterator[tuple[float, bytes]]:
        """Pairs of ranks `[start, stop)`, ascending, or descending when `reverse`."""
        return self.pairs(self.order.islice(start, stop, reverse=reverse))

    # --- score ranges --------------------------------------------------------
    def start_of(self, score: float, exclusive: bool = False) -> int:
        """The rank of the first pair whose score is >= score (> score when exclusive)."""
        if exclusive:
            if math.isinf(score) and score > 0:
                return len(self.order)
            return self.order.bisect_left(_bound(math.nextafter(score, math.inf)))
        return self.order.bisect_left(_bound(score))

    def end_of(self, score: float, exclusive: bool = False) -> int:
        """One past the rank of the last pair whose score is <= score (< score when exclusive)."""
        if exclusive:
            return self.order.bisect_left(_bound(score))
        if math.isinf(score) and score > 0:
            return len(self.order)
        return self.order.bisect_left(_bound(math.nextafter(score, math.inf)))

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


# Sentinels for `-` and `+` in a lexicographic range: below and above every member.
MINUS_INF: Final = object()
PLUS_INF: Final = object()
LexBound = bytes | object


def _cmplex(a: LexBound, b: LexBound) -> int:
    """Redis's sdscmplex: bytes order, with `-` below and `+` above everything."""
    if a is b:
        return 0
    if a is MINUS_INF or b is PLUS_INF:
        return -1
    if a is PLUS_INF or b is MINUS_INF:
        return 1
    return (a > b) - (a < b)  # type: ignore[operator]


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
    bound = prefix + lex.min  # type: ignore[operator]
    return order.bisect_right(bound) if lex.min_exclusive else order.bisect_left(bound)


def _bisect_max(order: SortedKeys, prefix: bytes, lex: LexRange) -> int:
    """One past where members <= lex.max end, in a set whose keys all begin with `prefix`."""
    if lex.max is PLUS_INF:
        return len(order)
    if lex.max is MINUS_INF:
        return 0
    bound = prefix + lex.max  # type: ignore[operator]
    return order.bisect_left(bound) if lex.max_exclusive else order.bisect_right(bound)
