"""The sorted-set type: members with float scores, ordered by (score, member).

Two structures, as Redis's skiplist encoding keeps them: a dict for
member -> score in O(1), and a SortedList of (score, member) pairs for rank and
range queries in O(log n). Ties on score order members as bytes, which is
Redis's order (memcmp) and ZPOPMIN's. This type knows nothing of keys, types or
clients; `store/keyspace.py` does.

`compact` mirrors Redis's listpack encoding, the form Redis keeps a small set
in (at most 128 members of at most 64 bytes; once outgrown, never again). It
changes two visible things, so emqd keeps the flag to answer as Redis does: a
listpack stores a score as text and writes -0 as `0` (a skiplist keeps -0),
and ZSCAN returns a listpack's whole content in one call, in order.

Score ranges are spans of ranks, `[start, stop)`, so a command can page
through them (LIMIT, REV) with one `islice`. Lexicographic ranges follow
Redis's listpack walk exactly (the first member >= min from the head, then on
while <= max): a bisect when all scores are equal, the only case Redis
defines; with mixed scores a scan that answers what Redis's listpack answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from sortedcontainers import SortedList

LISTPACK_ENTRIES = 128  # Redis's zset-max-listpack-entries default
LISTPACK_VALUE = 64  # Redis's zset-max-listpack-value default


class ZSet:
    """A sorted set. Contract: `scores` and `order` always hold the same pairs."""

    __slots__ = ("scores", "order", "compact")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: SortedList = SortedList()
        self.compact = True  # Redis would still hold this set as a listpack

    def __len__(self) -> int:
        return len(self.scores)

    def __contains__(self, member: bytes) -> bool:
        return member in self.scores

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        return iter(self.order)

    def score(self, member: bytes) -> float | None:
        return self.scores.get(member)

    def add(self, member: bytes, score: float) -> bool:
        """Set `member`'s score (not NaN). True when the member is new.

        An equal score (0 and -0 are equal) leaves the member as it is, as
        Redis does. A compact set stores -0 as 0.
        """
        old = self.scores.get(member)
        if old is not None:
            if old == score:
                return False
            if score == 0 and self.compact:
                score = 0.0
            self.order.remove((old, member))
            self.scores[member] = score
            self.order.add((score, member))
            return False
        if self.compact:
            if len(self.scores) >= LISTPACK_ENTRIES or len(member) > LISTPACK_VALUE:
                self.compact = False
            elif score == 0:
                score = 0.0
        self.scores[member] = score
        self.order.add((score, member))
        return True

    def remove(self, member: bytes) -> bool:
        """Remove `member`. True when it was there."""
        old = self.scores.pop(member, None)
        if old is None:
            return False
        self.order.remove((old, member))
        return True

    def first(self) -> tuple[float, bytes] | None:
        """The (score, member) pair ZPOPMIN would take, without taking it."""
        return self.order[0] if self.scores else None

    def rank(self, member: bytes) -> int | None:
        """`member`'s 0-based rank in ascending order, None when absent."""
        score = self.scores.get(member)
        if score is None:
            return None
        return self.order.index((score, member))

    def walk(self, start: int, stop: int, reverse: bool = False) -> Iterator[tuple[float, bytes]]:
        """Pairs of ranks `[start, stop)`, ascending, or descending when `reverse`."""
        return self.order.islice(start, stop, reverse=reverse)

    # --- score ranges --------------------------------------------------------
    def start_of(self, score: float, exclusive: bool = False) -> int:
        """The rank of the first pair whose score is >= score (> score when exclusive)."""
        if exclusive:
            if math.isinf(score) and score > 0:
                return len(self.order)
            return self.order.bisect_left((math.nextafter(score, math.inf), b""))
        return self.order.bisect_left((score, b""))

    def end_of(self, score: float, exclusive: bool = False) -> int:
        """One past the rank of the last pair whose score is <= score (< score when exclusive)."""
        if exclusive:
            return self.order.bisect_left((score, b""))
        if math.isinf(score) and score > 0:
            return len(self.order)
        return self.order.bisect_left((math.nextafter(score, math.inf), b""))

    def score_span(
        self, low: float, high: float, low_exclusive: bool = False, high_exclusive: bool = False
    ) -> tuple[int, int]:
        """The ranks `[start, stop)` of the pairs with low <= score <= high (bounds as asked)."""
        start = self.start_of(low, low_exclusive)
        stop = self.end_of(high, high_exclusive)
        return (start, stop) if start < stop else (start, start)

    def by_score(
        self, low: float, high: float, low_exclusive: bool = False, high_exclusive: bool = False
    ) -> Iterator[tuple[float, bytes]]:
        """Pairs with low <= score <= high (bounds exclusive as asked), in order."""
        start, stop = self.score_span(low, high, low_exclusive, high_exclusive)
        return self.order.islice(start, stop)

    # --- lexicographic ranges ------------------------------------------------
    def lex_first(self, lex: LexRange) -> int | None:
        """The rank ZRANGEBYLEX starts at: the first member >= min, if it is <= max."""
        order = self.order
        if not self._may_hold(lex):
            return None
        if order[0][0] == order[-1][0]:  # one score: the members are sorted, bisect
            first = _bisect_min(order, order[0][0], lex)
        else:
            # _may_hold saw the last member >= min, so there is one
            first = next(i for i, (_, member) in enumerate(order) if lex.gte_min(member))
        return first if first < len(order) and lex.lte_max(order[first][1]) else None

    def lex_last(self, lex: LexRange) -> int | None:
        """The rank ZREVRANGEBYLEX starts at: the last member <= max, if it is >= min."""
        order = self.order
        if not self._may_hold(lex):
            return None
        if order[0][0] == order[-1][0]:
            last = _bisect_max(order, order[0][0], lex) - 1
        else:
            top = len(order) - 1
            last = next(top - i for i, (_, m) in enumerate(reversed(order)) if lex.lte_max(m))
        return last if last >= 0 and lex.gte_min(order[last][1]) else None

    def lex_count(self, lex: LexRange) -> int:
        """ZLEXCOUNT: members from `lex_first` on while they are <= max."""
        first = self.lex_first(lex)
        if first is None:
            return 0
        order = self.order
        if order[0][0] == order[-1][0]:
            return max(0, _bisect_max(order, order[0][0], lex) - first)
        count = 0
        for _, member in order.islice(first):
            if not lex.lte_max(member):
                break
            count += 1
        return count

    def _may_hold(self, lex: LexRange) -> bool:
        """Redis's zzlIsInLexRange: a non-empty range that overlaps [first, last] member."""
        order = self.order
        return bool(order) and not lex.empty() and lex.gte_min(order[-1][1]) and lex.lte_max(
            order[0][1]
        )


# Sentinels for `-` and `+` in a lexicographic range: below and above every member.
MINUS_INF = object()
PLUS_INF = object()
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


def _bisect_min(order: SortedList, score: float, lex: LexRange) -> int:
    if lex.min is MINUS_INF:
        return 0
    if lex.min is PLUS_INF:
        return len(order)
    if lex.min_exclusive:
        return order.bisect_right((score, lex.min))
    return order.bisect_left((score, lex.min))


def _bisect_max(order: SortedList, score: float, lex: LexRange) -> int:
    if lex.max is PLUS_INF:
        return len(order)
    if lex.max is MINUS_INF:
        return 0
    if lex.max_exclusive:
        return order.bisect_left((score, lex.max))
    return order.bisect_right((score, lex.max))
