"""A small sorted set held as one `bytes` object, as Redis holds one in a listpack.

A queue has many small sets (a lane's waiting jobs, a small queue's `pending`,
the ring of a few lanes) and, held as a dict plus sorted lists, each would cost
about 700 bytes at one member where Redis spends 80. Held here, a set of n
members is one bytes object: the keyspace stores it as the value itself, with
no object around it, and a write builds the next one (a copy of at most a few
kilobytes, as Redis's listpack moves its bytes on an insert).

Layout: a count, then the entries in Redis's order (score, then member bytes):

    count  = 1 byte, or 0xFF + 4 bytes big-endian when >= 255
    entry  = length, packed key (store/packed.py: 9 bytes of score + the member), length'
    length = the member's length: 1 byte, or 0xFF + 4 bytes big-endian when >= 255
    length'= the same length written backwards (1 byte, or 4 bytes + 0xFF), so the
             last entry is found from the end (a job added goes last)

Each entry is thus its packed key between two lengths, and the keys of a set
compare as bytes in the set's order. A member is found with one `find` of its
bytes followed by its length (in C), then a walk of the lengths from the nearer
end checks that the match starts a member (a member's bytes may also appear
inside another entry). Every function takes the bytes and returns new ones; the
caller (store/zset.py, store/keyspace.py) decides when a set outgrows this form
(Redis's `zset-max-listpack-entries` and `-value`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from emqd.store.packed import PREFIX, score_at

EMPTY: Final = b"\x00"  # a set of no members
_LONG: Final = 255  # a count or length byte that says: 4 bytes follow
_BYTE: Final = [bytes((i,)) for i in range(256)]


def count(raw: bytes) -> int:
    """How many members."""
    n = raw[0]
    return n if n < _LONG else int.from_bytes(raw[1:5], "big")


def start(raw: bytes) -> int:
    """The offset of the first entry (just past the count)."""
    return 1 if raw[0] < _LONG else 5


def _head(n: int) -> bytes:
    return _BYTE[n] if n < _LONG else b"\xff" + n.to_bytes(4, "big")


def _length(raw: bytes, off: int) -> int:
    """The member length of the entry at `off`."""
    n = raw[off]
    return n if n < _LONG else int.from_bytes(raw[off + 1:off + 5], "big")


def end(raw: bytes, off: int) -> int:
    """The offset just past the entry at `off`."""
    n = raw[off]
    if n < _LONG:
        return off + n + (PREFIX + 2)
    return off + int.from_bytes(raw[off + 1:off + 5], "big") + (PREFIX + 10)


def key_at(raw: bytes, off: int) -> bytes:
    """The packed key of the entry at `off`."""
    n = raw[off]
    if n < _LONG:
        return raw[off + 1:off + 1 + PREFIX + n]
    n = int.from_bytes(raw[off + 1:off + 5], "big")
    return raw[off + 5:off + 5 + PREFIX + n]


def member_at(raw: bytes, off: int) -> bytes:
    n = raw[off]
    if n < _LONG:
        return raw[off + 1 + PREFIX:off + 1 + PREFIX + n]
    n = int.from_bytes(raw[off + 1:off + 5], "big")
    return raw[off + 5 + PREFIX:off + 5 + PREFIX + n]


def score_of_entry(raw: bytes, off: int) -> float:
    return score_at(raw, off + (1 if raw[off] < _LONG else 5))


def last(raw: bytes) -> int:
    """The offset of the last entry (the set is not empty)."""
    size = len(raw)
    n = raw[size - 1]
    if n < _LONG:
        return size - (PREFIX + 2) - n
    return size - (PREFIX + 10) - int.from_bytes(raw[size - 5:size - 1], "big")


def _entry(key: bytes, n: int) -> bytes:
    if n < _LONG:
        length = _BYTE[n]
        return length + key + length
    word = n.to_bytes(4, "big")
    return b"\xff" + word + key + word + b"\xff"


def _back(raw: bytes, off: int) -> int:
    """The offset of the entry that ends at `off` (read from its trailing length)."""
    n = raw[off - 1]
    if n < _LONG:
        return off - n - (PREFIX + 2)
    return off - int.from_bytes(raw[off - 5:off - 1], "big") - (PREFIX + 10)


def _starts_entry(raw: bytes, at: int) -> bool:
    """Whether an entry starts at `at`: walked to from the nearer end (a job added goes
    last and the oldest is taken first, so a queue's finds are near one end or the other)."""
    base, size = start(raw), len(raw)
    if at - base <= size - at:
        off = base
        while off < at:
            off = end(raw, off)
    else:
        off = size
        while off > at:
            off = _back(raw, off)
    return off == at


def find(raw: bytes, member: bytes) -> int:
    """The offset of `member`'s entry, -1 when absent."""
    n = len(member)
    if n < _LONG:
        needle = member + _BYTE[n]
        lead = 1 + PREFIX
    else:
        needle = member + n.to_bytes(4, "big") + b"\xff"
        lead = 5 + PREFIX
    pos = raw.find(needle, start(raw) + lead)
    while pos >= 0:
        at = pos - lead  # where the entry would start
        if _length(raw, at) == n and _starts_entry(raw, at):
            return at
        pos = raw.find(needle, pos + 1)
    return -1


def added(raw: bytes, member: bytes, key: bytes, entries: int, longest: int) -> bytes:
    """`raw` with `member` at packed key `key` (`raw` itself when it holds that already);
    b"" when the member is new and the set may not hold it in this form (it has
    `entries` members, or the member is longer than `longest`)."""
    off = find(raw, member)
    n = count(raw)
    size = len(raw)
    if off < 0:
        if n >= entries or len(member) > longest:
            return b""
        gone = stop = size
        n += 1
    else:
        if key_at(raw, off) == key:
            return raw
        gone, stop = off, end(raw, off)
    entry = _entry(key, len(member))
    base = start(raw)
    # where the key goes: after every other entry whose key is lower
    at = size
    if n > 1:
        tail = last(raw)
        if tail == gone or key_at(raw, tail) > key:
            at = base
            while at < size and (at == gone or key_at(raw, at) < key):
                at = end(raw, at)
    if at <= gone:
        return b"".join((_head(n), raw[base:at], entry, raw[at:gone], raw[stop:]))
    return b"".join((_head(n), raw[base:gone], raw[stop:at], entry, raw[at:]))


def removed(raw: bytes, member: bytes) -> bytes:
    """`raw` without `member` (`raw` itself when absent; EMPTY after the last one)."""
    off = find(raw, member)
    if off < 0:
        return raw
    return _head(count(raw) - 1) + raw[start(raw):off] + raw[end(raw, off):]


def keys(raw: bytes) -> list[bytes]:
    """Every packed key, in order."""
    found: list[bytes] = []
    off, size = start(raw), len(raw)
    while off < size:
        found.append(key_at(raw, off))
        off = end(raw, off)
    return found


def members(raw: bytes) -> Iterator[bytes]:
    """Every member in order, lazily (CLAIM stops at the first claimable job)."""
    off, size = start(raw), len(raw)
    while off < size:
        yield member_at(raw, off)
        off = end(raw, off)


def head(raw: bytes, most: int, below: bytes | None = None) -> list[bytes]:
    """The members of the first `most` entries whose keys are below `below` (None: any)."""
    found: list[bytes] = []
    off, size = start(raw), len(raw)
    while off < size and len(found) < most:
        if below is not None and key_at(raw, off) >= below:
            break
        found.append(member_at(raw, off))
        off = end(raw, off)
    return found


def rank_below(raw: bytes, bound: bytes) -> int:
    """How many keys are below `bound`."""
    rank = 0
    off, size = start(raw), len(raw)
    while off < size and key_at(raw, off) < bound:
        rank += 1
        off = end(raw, off)
    return rank


def rank_at(raw: bytes, at: int) -> int:
    """The rank of the entry at offset `at`."""
    rank = 0
    off = start(raw)
    while off < at:
        rank += 1
        off = end(raw, off)
    return rank


def of_keys(sorted_keys: list[bytes]) -> bytes:
    """The form of a set whose packed keys are `sorted_keys` (ascending, distinct)."""
    parts = [_head(len(sorted_keys))]
    for key in sorted_keys:
        parts.append(_entry(key, len(key) - PREFIX))
    return b"".join(parts)
