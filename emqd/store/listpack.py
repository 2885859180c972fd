"""A small sorted set held as one `bytes` object, as Redis holds one in a listpack.

A queue has many small sets (a lane's waiting jobs, a small queue's `pending`,
the ring of a few lanes) and, held as a dict plus sorted lists, each would cost
about 700 bytes at one member where Redis spends 80. Held here, a set of n
members is one bytes object: the keyspace stores it as the value itself, with
no object around it, and a write builds the next one (a copy of at most a few
kilobytes, as Redis's listpack moves its bytes on an insert).

Layout: a count, one signature byte per entry, then the entries in Redis's order
(score, then member bytes):

    count  = 1 byte, or 0xFF + 4 bytes big-endian when >= 255
    sigs   = `count` bytes: entry i's member summed up in one byte (`signature`)
    entry  = length, packed key (store/packed.py: 9 bytes of score + the member), length'
    length = the member's length: 1 byte, or 0xFF + 4 bytes big-endian when >= 255
    length'= the same length written backwards (1 byte, or 4 bytes + 0xFF), so the
             last entry is found from the end (a job added goes last)

Each entry is thus its packed key between two lengths, and the keys of a set
compare as bytes in the set's order. A member is found by its signature: one
`find` of a single byte in the signatures (memchr, in C) gives the ranks worth
looking at (none among a queue's consecutive job ids, about one in 256 of
other members), and a walk of the lengths from the nearer end reaches each. The
signatures are what make an absent member cheap: a ZADD of a new job looks for it
first, and searching the entries' bytes for it cost ~0.6 us at 50 members, a
third of a job cycle's difference from the skiplist form. Members chosen to share
a signature cost a walk of the set (at most `zset-max-listpack-entries`), which
is what each search costs in Redis's listpack.
The first and the last entries are compared before any search: a queue takes
its oldest job and adds its newest. Every function takes the bytes and returns
new ones; the caller (store/zset.py, store/keyspace.py) decides when a set
outgrows this form (Redis's `zset-max-listpack-entries` and `-value`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy_extensions import i64

from emqd.concat import LONG, length_prefix
from emqd.store.packed import PREFIX, score_at

EMPTY: Final = b"\x00"  # a set of no members
_BYTE: Final = [bytes((i,)) for i in range(256)]
# Up to this many signatures a compiled loop over them is quicker than `bytes.find`,
# whose argument parsing alone costs ~80 ns (measured: 44 against 104 ns at 25 members).
_SCAN: Final = 48


def count(raw: bytes) -> int:
    """How many members."""
    n = raw[0]
    return n if n < LONG else int.from_bytes(raw[1:5], "big")


def _sigs_at(raw: bytes) -> int:
    """The offset of the signatures (just past the count)."""
    return 1 if raw[0] < LONG else 5


def start(raw: bytes) -> int:
    """The offset of the first entry (just past the count and the signatures)."""
    n = raw[0]
    return n + 1 if n < LONG else int.from_bytes(raw[1:5], "big") + 5


def signature(member: bytes) -> int:
    """The member's last (up to) 8 bytes read as decimal digits, modulo 256: a few reads
    in 64-bit arithmetic, where `hash` of a fresh member cost a third of a search at
    50 members. A decimal id's signature is the id modulo 256 (10**8 is a multiple of
    256, so the digits before the last 8 add nothing), so any 256 consecutive job ids
    of a queue have different ones."""
    n: i64 = len(member)
    i: i64 = n - 8
    if i < 0:
        i = 0
    sig: i64 = 0
    while i < n:  # a while over i64s: mypyc boxed a conditional range's start
        sig = (sig * 10 + member[i] - 48) & 255
        i += 1
    return int(sig)


def _sig(member: bytes) -> bytes:
    return _BYTE[signature(member)]


def end(raw: bytes, off: int) -> int:
    """The offset just past the entry at `off`."""
    n = raw[off]
    if n < LONG:
        return off + n + (PREFIX + 2)
    return off + int.from_bytes(raw[off + 1:off + 5], "big") + (PREFIX + 10)


def key_at(raw: bytes, off: int) -> bytes:
    """The packed key of the entry at `off`."""
    n = raw[off]
    if n < LONG:
        return raw[off + 1:off + 1 + PREFIX + n]
    n = int.from_bytes(raw[off + 1:off + 5], "big")
    return raw[off + 5:off + 5 + PREFIX + n]


def member_at(raw: bytes, off: int) -> bytes:
    n = raw[off]
    if n < LONG:
        return raw[off + 1 + PREFIX:off + 1 + PREFIX + n]
    n = int.from_bytes(raw[off + 1:off + 5], "big")
    return raw[off + 5 + PREFIX:off + 5 + PREFIX + n]


def score_of_entry(raw: bytes, off: int) -> float:
    return score_at(raw, off + (1 if raw[off] < LONG else 5))


def last(raw: bytes) -> int:
    """The offset of the last entry (the set is not empty)."""
    size = len(raw)
    n = raw[size - 1]
    if n < LONG:
        return size - (PREFIX + 2) - n
    return size - (PREFIX + 10) - int.from_bytes(raw[size - 5:size - 1], "big")


def _entry(key: bytes, n: int) -> bytes:
    if n < LONG:
        length = _BYTE[n]
        return length + key + length
    word = n.to_bytes(4, "big")
    return b"\xff" + word + key + word + b"\xff"


def _back(raw: bytes, off: int) -> int:
    """The offset of the entry that ends at `off` (read from its trailing length)."""
    n = raw[off - 1]
    if n < LONG:
        return off - n - (PREFIX + 2)
    return off - int.from_bytes(raw[off - 5:off - 1], "big") - (PREFIX + 10)


def _offset_of(raw: bytes, base: int, n: int, rank: int) -> int:
    """The offset of the entry of `rank` (< n), walked to from the nearer end."""
    if rank + rank < n:
        off = base
        for _ in range(rank):
            off = end(raw, off)
        return off
    off = len(raw)
    for _ in range(n - rank):
        off = _back(raw, off)
    return off


def rank_of(raw: bytes, member: bytes) -> int:
    """`member`'s rank, -1 when absent."""
    return _rank(raw, member, signature(member))


def _rank(raw: bytes, member: bytes, sig: i64) -> int:
    """rank_of, given the member's signature (`added` has a use for it too)."""
    n = count(raw)
    if n == 0:
        return -1
    size = len(raw)
    length = len(member)
    sigs = _sigs_at(raw)
    base = sigs + n
    lo, hi = sigs, base  # the signatures still to look at
    if length < LONG:
        if (raw[sigs] == sig and raw[base] == length
                and raw[base + 1 + PREFIX:base + 1 + PREFIX + length] == member):
            return 0
        if (raw[base - 1] == sig and raw[size - 1] == length
                and raw[size - 1 - length:size - 1] == member):
            return n - 1
        lo, hi = sigs + 1, base - 1
    if n > _SCAN:
        at = raw.find(sig, lo, hi)
        while at >= 0:
            rank = at - sigs
            if member_at(raw, _offset_of(raw, base, n, rank)) == member:
                return rank
            at = raw.find(sig, at + 1, hi)
        return -1
    return _scan(raw, member, sig, lo, hi, sigs, base, n)


def _scan(raw: bytes, member: bytes, sig: i64, lo: i64, hi: i64, sigs: int, base: int,
          n: int) -> int:
    """rank_of's loop over the signatures in [lo, hi), in 64-bit arithmetic (half the
    instructions of one over tagged ints)."""
    at: i64 = lo
    while at < hi:
        if raw[at] == sig:
            rank = int(at) - sigs
            if member_at(raw, _offset_of(raw, base, n, rank)) == member:
                return rank
        at += 1
    return -1


def find(raw: bytes, member: bytes) -> int:
    """The offset of `member`'s entry, -1 when absent."""
    rank = rank_of(raw, member)
    if rank < 0:
        return -1
    return _offset_of(raw, start(raw), count(raw), rank)


def added(raw: bytes, member: bytes, key: bytes, entries: int, longest: int) -> bytes:
    """`raw` with `member` at packed key `key` (`raw` itself when it holds that already);
    b"" when the member is new and the set may not hold it in this form (it has
    `entries` members, or the member is longer than `longest`)."""
    signed = signature(member)
    rank = _rank(raw, member, signed)
    n = count(raw)
    size = len(raw)
    sigs_at = _sigs_at(raw)
    base = sigs_at + n
    if (rank < 0 and n < entries and n < LONG - 1 and len(member) <= longest
            and len(member) < LONG
            and (n == 0 or key_at(raw, last(raw)) < key)):
        return _appended(raw, base, n, _BYTE[signed], key, len(member))
    sigs = raw[sigs_at:base]
    if rank < 0:
        if n >= entries or len(member) > longest:
            return b""
        gone = stop = size
        sig = _BYTE[signed]
        n += 1
    else:
        gone = _offset_of(raw, base, n, rank)
        if key_at(raw, gone) == key:
            return raw
        stop = end(raw, gone)
        sig = sigs[rank:rank + 1]
        sigs = sigs[:rank] + sigs[rank + 1:]
    entry = _entry(key, len(member))
    # where the key goes: after every other entry whose key is lower
    at = size
    below = len(sigs)  # how many other entries go before it
    if n > 1:
        tail = last(raw)
        if tail == gone or key_at(raw, tail) > key:
            at = base
            below = 0
            while at < size and (at == gone or key_at(raw, at) < key):
                if at != gone:
                    below += 1
                at = end(raw, at)
    head = length_prefix(n) + sigs[:below] + sig + sigs[below:]
    if at <= gone:
        return b"%b%b%b%b%b" % (head, raw[base:at], entry, raw[at:gone], raw[stop:])
    return b"%b%b%b%b%b" % (head, raw[base:gone], raw[stop:at], entry, raw[at:])


def _appended(raw: bytes, base: int, n: int, sig: bytes, key: bytes, size: int) -> bytes:
    """`raw` (of `n` < 254 members, the entries from `base`) with a new last entry, its
    signature `sig`, packed key `key` and member `size` bytes long (< 255): a queue's
    every new job, so it is built at once (half the time of the general way)."""
    length = _BYTE[size]  # the caller saw the member shorter than 255 bytes
    return b"%b%b%b%b%b%b%b" % (_BYTE[n + 1], raw[1:base], sig, raw[base:], length, key, length)


def removed(raw: bytes, member: bytes) -> bytes:
    """`raw` without `member` (`raw` itself when absent; EMPTY after the last one)."""
    rank = rank_of(raw, member)
    if rank < 0:
        return raw
    n = count(raw)
    sigs = _sigs_at(raw)
    base = sigs + n
    if rank == 0 and n < LONG:  # a queue's oldest job: the common case, one copy
        return b"%b%b%b" % (_BYTE[n - 1], raw[2:base], raw[end(raw, base):])
    off = _offset_of(raw, base, n, rank)
    return b"%b%b%b%b%b" % (length_prefix(n - 1), raw[sigs:sigs + rank],
                            raw[sigs + rank + 1:base], raw[base:off], raw[end(raw, off):])


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
