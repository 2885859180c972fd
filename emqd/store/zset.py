"""The sorted-set type: members with float scores, ordered by (score, member).

Two structures, as Redis's skiplist encoding keeps them: a dict for
member -> score in O(1), and a SortedList of (score, member) pairs for rank and
range queries in O(log n). Ties on score order members as bytes, which is
Redis's order (memcmp) and ZPOPMIN's. This type knows nothing of keys, types or
clients; `store/keyspace.py` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from sortedcontainers import SortedList


class ZSet:
    """A sorted set. Contract: `scores` and `order` always hold the same pairs."""

    __slots__ = ("scores", "order")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: SortedList = SortedList()

    def __len__(self) -> int:
        return len(self.scores)

    def __contains__(self, member: bytes) -> bool:
        return member in self.scores

    def score(self, member: bytes) -> float | None:
        return self.scores.get(member)

    def add(self, member: bytes, score: float) -> bool:
        """Set `member`'s score. True when the member is new."""
        old = self.scores.get(member)
        if old is not None:
            if old == score:
                return False
            self.order.remove((old, member))
            self.scores[member] = score
            self.order.add((score, member))
            return False
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
        score = self.scores.get(member)
        if score is None:
            return None
        return self.order.index((score, member))

    def by_rank(self, start: int, stop: int) -> list[tuple[float, bytes]]:
        """Pairs from rank `start` to `stop` inclusive, both already clamped to 0..len-1."""
        return list(self.order.islice(start, stop + 1))

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

    def by_score(
        self, low: float, high: float, low_exclusive: bool = False, high_exclusive: bool = False
    ) -> Iterator[tuple[float, bytes]]:
        """Pairs with low <= score <= high (bounds exclusive as asked), in order."""
        start = self.start_of(low, low_exclusive)
        stop = self.end_of(high, high_exclusive)
        return self.order.islice(start, stop) if start < stop else iter(())

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        return iter(self.order)
