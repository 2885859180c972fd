"""The index a SCAN, HSCAN or ZSCAN walks: O(COUNT) a call, kept only while a scan runs.

Every member has a fixed *position* in 1..2**63, from its hash (`position`).
A scan's cursor is the next position to visit, so a call returns the members
whose position lies in the next stretch, and that stretch's end as the next
cursor (0: the end). A member's position never changes while the process
lives (a sorted set's score change does not move it, as it would in an order
by score), so a member present from the first call to the last is returned
exactly once, whatever is added, removed or rescored between the calls.

Finding the next stretch's members without a pass over the collection is
this index's work: the members grouped into 2**k buckets by the top k bits
of their position (about TARGET members a bucket at the size it was built
for), each bucket a small tuple in no order (tuples of bytes, which the
cyclic garbage collector stops tracking: a million members cost it one list
of buckets, not a hundred thousand lists to traverse). A call takes whole
buckets from the cursor's until it holds COUNT members, so it costs O(COUNT).

It is built lazily, because the collections it serves are the ones the hot
verbs write (a queue's `pending`, the keyspace itself: an ADD creates a key):
an index kept always would cost every ADD, CLAIM and COMPLETE its upkeep. A
scan's first call on a big collection starts one from a list of the
collection's members taken then (`snapshot_chunks`: made in C, 8 bytes a
member, about 7 ms a million); it is filled `build(n)` members at a time,
one step a call (the calls until then answer no member and keep their
cursor, as Redis allows), and every write to the collection meanwhile keeps
it exact (`added`, `removed`: the owner calls them only while it has an
index; the walk leaves a member a write already settled as it is). The owner
drops it when a scan reaches its end, or once it has seen more writes than
`writes_max` since a scan last used it (an abandoned scan must not tax a
busy queue for ever). Dropping is always safe: a cursor is a position, not a
handle, so a later call builds the index again and goes on from there.
"""

from __future__ import annotations

from collections.abc import Iterator

MASK = 2**63 - 1
TARGET = 8  # members a bucket holds on average, at the size the index was built for
EMPTY_BUCKETS = 10  # a call looks at most at this many buckets per member asked (Redis: 10)
MIN_WRITES = 65_536  # writes an unused index outlives, at least (more for a big collection)


def position(member: bytes) -> int:
    """The member's place in every scan of this process, 1..2**63 (0 is no place: the
    cursor that starts and ends a scan)."""
    return (hash(member) & MASK) + 1


class ScanIndex:
    """The members of one collection, bucketed by position (see the module docstring)."""

    __slots__ = ("shift", "buckets", "chunks", "settled", "writes", "writes_max")

    def __init__(self, size: int, chunks: Iterator[list[bytes]]) -> None:
        bits = (size // TARGET).bit_length()  # 2**bits buckets: about TARGET members each
        self.shift = 63 - bits
        self.buckets: list[tuple[bytes, ...] | None] = [None] * (1 << bits)
        self.chunks: Iterator[list[bytes]] | None = chunks  # None once every member is in
        # While building: the members a write added or removed, which the walk, when it
        # meets them, leaves as the write left them (cheaper than asking the collection).
        self.settled: set[bytes] | None = set()
        self.writes = 0
        self.writes_max = max(2 * size, MIN_WRITES)

    # --- building --------------------------------------------------------------------
    def build(self, budget: int) -> bool:
        """Index about `budget` more members of the walk; True once it is complete."""
        chunks = self.chunks
        if chunks is None:
            return True
        self.writes = 0  # a scan is using it
        settled, buckets, shift = self.settled, self.buckets, self.shift
        done = 0
        while done < budget:
            chunk = next(chunks, None)
            if chunk is None:
                self.chunks = self.settled = None
                return True
            for member in chunk:
                if not (settled and member in settled):
                    where = (hash(member) & MASK) >> shift
                    bucket = buckets[where]
                    buckets[where] = (member,) if bucket is None else (*bucket, member)
            done += len(chunk)
        return False

    # --- the owner's writes, while it has an index -------------------------------------
    def added(self, member: bytes) -> ScanIndex | None:
        """A member came (it was not there just before, so it is in no bucket). Returns
        the index to keep: None once it outlived its use."""
        buckets = self.buckets
        where = (hash(member) & MASK) >> self.shift
        bucket = buckets[where]
        buckets[where] = (member,) if bucket is None else (*bucket, member)
        if self.settled is not None:
            self.settled.add(member)
        self.writes += 1
        return self if self.writes <= self.writes_max else None

    def removed(self, member: bytes) -> ScanIndex | None:
        """A member went (while building, it may not be in yet). Returns the index to
        keep, as `added`."""
        buckets = self.buckets
        where = (hash(member) & MASK) >> self.shift
        bucket = buckets[where]
        if bucket is not None:
            try:
                at = bucket.index(member)
            except ValueError:
                pass
            else:
                buckets[where] = (bucket[:at] + bucket[at + 1:]) or None
        if self.settled is not None:
            self.settled.add(member)
        self.writes += 1
        return self if self.writes <= self.writes_max else None

    # --- a scan's call -----------------------------------------------------------------
    def page(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """The members from position `cursor` on, whole buckets until about `count` of them
        (or EMPTY_BUCKETS * count buckets looked at), and the next cursor (0 at the end).

        Only for a built index. The cursor may fall inside a bucket (an index built
        for another size made it): that bucket's members before it are left out.
        """
        self.writes = 0
        buckets, shift = self.buckets, self.shift
        start = max(cursor, 1) - 1
        where = start >> shift
        if where >= len(buckets):
            return 0, []
        first = buckets[where] or ()
        if start & ((1 << shift) - 1):
            found = [member for member in first if hash(member) & MASK >= start]
        else:
            found = list(first)
        where += 1
        last = min(len(buckets), where + EMPTY_BUCKETS * count)
        while where < last and len(found) < count:
            bucket = buckets[where]
            if bucket:
                found += bucket
            where += 1
        return (0 if where >= len(buckets) else (where << shift) + 1), found


def snapshot_chunks(names: list[bytes], size: int) -> Iterator[list[bytes]]:
    """The walk an index is built from: the members listed when it started (a collection
    that writes may change between two calls cannot be walked itself), `size` at a time."""
    for start in range(0, len(names), size):
        yield names[start:start + size]
