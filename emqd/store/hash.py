"""The hash type: a dict of bytes to bytes, in insertion order.

Redis keeps a small hash (at most 128 fields, values at most 64 bytes) as a
listpack, which lists fields in insertion order; a Python dict keeps that same
order, so HGETALL on a small hash answers byte for byte what Redis answers.
This module holds the one rule that is about hash values rather than keys:
reading a stored value as Redis's HINCRBY does.
"""

from __future__ import annotations

from emqd.errors import HASH_NOT_INTEGER, OVERFLOW
from emqd.numbers import INT64_MAX, INT64_MIN, parse_int

Hash = dict  # dict[bytes, bytes]


def incremented(current: bytes | None, by: int) -> int:
    """The value HINCRBY would store, or the ReplyError it would answer.

    A missing field counts as 0. A stored value that is not a 64-bit integer as
    Redis reads one raises `ERR hash value is not an integer`; a result outside
    64 bits raises `ERR increment or decrement would overflow`.
    """
    value = 0 if current is None else parse_int(current)
    if value is None:
        raise HASH_NOT_INTEGER
    result = value + by
    if result > INT64_MAX or result < INT64_MIN:
        raise OVERFLOW
    return result
