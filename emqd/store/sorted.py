"""A sorted list of bytes keys, for the sorted sets' packed keys (store/zset.py).

The layout of sortedcontainers' SortedList, kept to what a sorted set needs:
the keys in order in sublists of at most 2 * LOAD, and each sublist's last
key in `maxes`, so that finding a key is a bisect of `maxes` then of one
sublist, both in C. The queue's sets grow at one end and shrink at the other
(a job added goes last in `pending`, a lease last in `active`, a finished job
last in `completed`; CLAIM, the sweep and retention take the first ones), so
`add` of a key above every other and `remove` of the first key are each a
few steps without a bisect, which is most of what the job cycle does.

Ranks (ZRANK, ZRANGE by rank) sum the sizes of the sublists before the key's
one: O(n / LOAD), a few microseconds at a million keys; no verb needs them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from itertools import accumulate, chain, islice
from typing import Final

LOAD: Final = 500  # by default a sublist is split in two when it passes 2 * LOAD keys


class SortedKeys:
    """Distinct bytes keys in ascending order. Contract: `maxes[i] == lists[i][-1]`."""

    __slots__ = ("lists", "maxes", "size", "load")

    def __init__(self, load: int = LOAD) -> None:
        self.lists: list[list[bytes]] = []
        self.maxes: list[bytes] = []
        self.size = 0
        self.load = load

    @staticmethod
    def of(keys: list[bytes], load: int = LOAD) -> SortedKeys:
        """`keys` (ascending, distinct) as sorted keys, in sublists of `load` keys."""
        order = SortedKeys(load)
        for i in range(0, len(keys), load):
            sub = keys[i:i + load]
            order.lists.append(sub)
            order.maxes.append(sub[-1])
        order.size = len(keys)
        return order

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[bytes]:
        return chain.from_iterable(self.lists)

    def __reversed__(self) -> Iterator[bytes]:
        return chain.from_iterable(reversed(sub) for sub in reversed(self.lists))

    def add(self, key: bytes) -> None:
        """Insert `key` (not present)."""
        maxes = self.maxes
        self.size += 1
        if not maxes:
            self.lists.append([key])
            maxes.append(key)
            return
        if key > maxes[-1]:  # above every key: the end of the last sublist
            pos = len(maxes) - 1
            sub = self.lists[pos]
            sub.append(key)
            maxes[pos] = key
        else:
            pos = bisect_left(maxes, key)
            sub = self.lists[pos]
            insort(sub, key)
        load = self.load
        if len(sub) > 2 * load:
            self.lists.insert(pos + 1, sub[load:])
            del sub[load:]
            maxes.insert(pos, sub[-1])

    def remove(self, key: bytes) -> None:
        """Remove `key`, which must be present."""
        lists = self.lists
        first = lists[0]
        if first[0] == key:  # the first key: what CLAIM and the trims take
            pos, index, sub = 0, 0, first
        else:
            pos = bisect_left(self.maxes, key)
            sub = lists[pos]
            index = bisect_left(sub, key)
        del sub[index]
        self.size -= 1
        if not sub:
            del lists[pos]
            del self.maxes[pos]
        elif index == len(sub):
            self.maxes[pos] = sub[-1]

    def first(self) -> bytes:
        return self.lists[0][0]

    def last(self) -> bytes:
        return self.maxes[-1]

    def bisect_left(self, key: bytes) -> int:
        """The number of keys below `key`."""
        maxes = self.maxes
        pos = bisect_left(maxes, key)
        if pos == len(maxes):
            return self.size
        return self._before(pos) + bisect_left(self.lists[pos], key)

    def bisect_right(self, key: bytes) -> int:
        """The number of keys at or below `key`."""
        maxes = self.maxes
        pos = bisect_right(maxes, key)
        if pos == len(maxes):
            return self.size
        return self._before(pos) + bisect_right(self.lists[pos], key)

    def index(self, key: bytes) -> int:
        """The rank of `key`, which must be present."""
        pos = bisect_left(self.maxes, key)
        return self._before(pos) + bisect_left(self.lists[pos], key)

    def _before(self, pos: int) -> int:
        """Keys in the sublists before sublist `pos`."""
        if pos <= len(self.lists) // 2:
            return sum(map(len, self.lists[:pos]))
        return self.size - sum(map(len, self.lists[pos:]))

    def __getitem__(self, rank: int) -> bytes:
        """The key of rank `rank` (negative counts from the end)."""
        if rank == 0:
            return self.lists[0][0]
        if rank == -1:
            return self.maxes[-1]
        if rank < 0:
            rank += self.size
        if not 0 <= rank < self.size:
            raise IndexError(rank)
        pos, offset = self._locate(rank)
        return self.lists[pos][offset]

    def islice(self, start: int = 0, stop: int | None = None,
               reverse: bool = False) -> Iterator[bytes]:
        """Keys of ranks [start, stop), ascending, or descending when `reverse`.

        O(n / LOAD) to find where to begin, then O(1) a key: a page deep in a
        big set costs what a page at its front does.
        """
        stop = self.size if stop is None else min(stop, self.size)
        start = max(start, 0)
        if start >= stop:
            return iter(())
        lists = self.lists
        if reverse:
            pos, offset = self._locate(stop - 1)
            tail = reversed(lists[pos][: offset + 1])
            rest = (reversed(sub) for sub in reversed(lists[:pos]))
            return islice(chain(tail, chain.from_iterable(rest)), stop - start)
        pos, offset = self._locate(start)
        head = islice(lists[pos], offset, None)
        return islice(chain(head, chain.from_iterable(lists[pos + 1:])), stop - start)

    def _locate(self, rank: int) -> tuple[int, int]:
        """(sublist, offset in it) of the key of rank `rank` (0 <= rank < size)."""
        lists = self.lists
        if rank < len(lists[0]):
            return 0, rank
        ends = list(accumulate(map(len, lists)))
        pos = bisect_right(ends, rank)
        return pos, rank - ends[pos - 1]
