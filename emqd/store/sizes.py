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
its shared schema holds) are not counted against it.
"""

from __future__ import annotations

from typing import Final, cast

from mypy_extensions import i64

ENTRY: Final = 40  # a dict entry: 24 bytes, its index, and the table's free room
KEY: Final = ENTRY  # a key's place in the keyspace's dict (its bytes are counted apart)
ROW: Final = 40  # a Row tuple: GC header and tuple header, before its 8 bytes a slot
BIG_HASH: Final = 144  # a BigHash: the dict subclass with its slots and its empty table
SKIPLIST: Final = 560  # a skiplist ZSet: the object, its dict, its sorted lists
WRAPPER: Final = 96  # a ZSet object around a listpack's bytes (a test's stored ZSet)
SLOT: Final = 9  # a packed key's place in the sorted lists (and their maxes)


def block(size: int) -> int:
    """The bytes an allocation of `size` takes."""
    if size <= 512:
        return (size + 15) & ~15
    return (size + 8 + 15) & ~15


def of_bytes(n: int) -> int:
    """A bytes object of `n` bytes."""
    return 0 if n <= 1 else block(33 + n)


def key(name: bytes) -> int:
    """A key's own cost in the keyspace: its name and its dict entry."""
    return of_bytes(len(name)) + KEY


def _of_value(n: i64) -> i64:
    """`of_bytes` in 64-bit arithmetic, for the loops below (a row's values are short)."""
    if n <= 1:
        return 0
    if n <= 512 - 33:
        return (n + 33 + 15) & ~15
    return (n + 33 + 8 + 15) & ~15


def row(values: tuple[object, ...]) -> int:
    """A Row `(mark, value, ...)`: the tuple and its values (the mark is shared)."""
    total: i64 = block(ROW + 8 * len(values))
    for i in range(1, len(values)):
        total += _of_value(len(cast(bytes, values[i])))
    return total


def row_growth(old: tuple[object, ...], new: tuple[object, ...]) -> int:
    """`row(new) - row(old)`, looking only at the values that changed: an HSET of a job's
    state and times keeps its payload and most fields, and a job cycle counts three."""
    if len(new) != len(old):
        return row(new) - row(old)
    growth: i64 = 0
    for i in range(1, len(new)):
        was = old[i]
        now = new[i]
        if now is not was:
            growth += _of_value(len(cast(bytes, now))) - _of_value(len(cast(bytes, was)))
    return growth


def field(name: bytes, value: bytes) -> int:
    """One field of a BigHash."""
    return of_bytes(len(name)) + of_bytes(len(value)) + ENTRY


def member(length: int) -> int:
    """One member of a skiplist ZSet: its bytes, its packed key, its dict entry and slot."""
    return of_bytes(length) + of_bytes(length + 9) + ENTRY + SLOT
