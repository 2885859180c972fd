"""The hash type: a dict of bytes to bytes, in insertion order.

Redis keeps a small hash (at most 512 fields, fields and values at most 64
bytes) as a listpack, which lists fields in insertion order; a Python dict
keeps that same order, so HGETALL on a small hash answers byte for byte what
Redis answers. A bigger hash Redis keeps as a hashtable, whose order the
protocol (section 7) lets emqd differ from. This module holds the rules that
are about hash values rather than keys: reading a stored value as Redis's
HINCRBY does, and whether Redis would list a hash as a listpack.
"""

from __future__ import annotations

from emqd.errors import HASH_NOT_INTEGER, OVERFLOW
from emqd.numbers import INT64_MAX, INT64_MIN, parse_int

Hash = dict  # dict[bytes, bytes]

LISTPACK_ENTRIES = 512  # Redis 7.0's hash-max-listpack-entries default (zsets: 128)
LISTPACK_VALUE = 64  # Redis's hash-max-listpack-value default


def incremented(current: bytes | None, by: int) -> int:
    """The value HINCRBY would store, or the ReplyError it would answer.

    A missing field counts as 0. A stored value that is not a 64-bit integer as
    Redis reads one raises `ERR hash value is not an integer`; a result outside
    64 bits raises `ERR increment or decrement would overflow`.
    """
    value = 0 if current is None else parse_int(current)
    if value is None:
        raise HASH_NOT_INTEGER()
    result = value + by
    if result > INT64_MAX or result < INT64_MIN:
        raise OVERFLOW()
    return result


def is_compact(row: dict) -> bool:
    """True when `row` fits a listpack: Redis lists it whole, in insertion order (HSCAN).

    Redis never turns a hashtable back into a listpack, so a hash that once
    outgrew the limits and shrank is a hashtable there and compact here; the
    protocol lets the order of such a hash differ, and emqd's is insertion order.
    """
    if len(row) > LISTPACK_ENTRIES:
        return False
    for name, value in row.items():
        if len(name) > LISTPACK_VALUE or len(value) > LISTPACK_VALUE:
            return False
    return True
