"""What the store's values cost in bytes, as CPython 3.11 holds them on a 64-bit machine.

MEMORY USAGE answers these figures, the keyspace keeps their running total
(`Keyspace.used`: INFO memory's dataset, the `maxmemory` limit), and
tests/store/test_sizes.py checks them against what tracemalloc sees. They are
worked out from lengths, not measured, so that keeping the total costs a job
cycle a few additions: pymalloc hands out blocks of up to 512 bytes in steps of
16, larger ones come from malloc (a 16-byte header, rounded to 16); a bytes
object is 33 bytes and its content, and CPython shares one object for each
bytes of length 0 or 1 (counted 0 here); a dict entry costs its 24 bytes, its
index and the free room a table keeps (`ENTRY`, the average over a table's
growth). Objects a value shares with others (a row's field names, which
its shared schema holds) are not counted against it. A small hash (store/hash.py's
Row) and a small sorted set (store/listpack.py) are each one bytes object.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

ENTRY: Final = 40  # a dict entry: 24 bytes, its index, and the table's free room
KEY: Final = ENTRY  # a key's place in the keyspace's dict (its bytes are counted apart)
BIG_HASH: Final = 144  # a BigHash: the dict subclass with its slots and its empty table
SKIPLIST: Final = 560  # a skiplist ZSet: the object, its dict, its sorted lists
WRAPPER: Final = 96  # a ZSet object around a listpack's bytes (a test's stored ZSet)
SLOT: Final = 9  # a packed key's place in the sorted lists (and their maxes)


def block(size: int) -> int:
    """The bytes an allocation of `size` takes (worked in 64-bit arithmetic: every write
    counts two or three)."""
    s: i64 = size
    if s <= 512:
        return (s + 15) & ~15
    return (s + 8 + 15) & ~15


def of_bytes(n: int) -> int:
    """A bytes object of `n` bytes."""
    return 0 if n <= 1 else block(33 + n)


def key(name: bytes) -> int:
    """A key's own cost in the keyspace: its name and its dict entry."""
    return of_bytes(len(name)) + KEY


def field(name: bytes, value: bytes) -> int:
    """One field of a BigHash."""
    return of_bytes(len(name)) + of_bytes(len(value)) + ENTRY


def member(length: int) -> int:
    """One member of a skiplist ZSet: its bytes, its packed key, its dict entry and slot."""
    return of_bytes(length) + of_bytes(length + 9) + ENTRY + SLOT
