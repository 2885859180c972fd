"""A sorted set's *packed key*: 9 bytes that sort as a score sorts, then the member.

Because bytes compare as memcmp, the packed keys of a set sort exactly in Redis's
order (score, then member bytes, which is also ZPOPMIN's order), so both forms
of a sorted set (store/listpack.py for a small one, store/zset.py's dict and
sorted list for a big one) order and compare members as bytes, and hold each
score once, inside the key: no float object, no (score, member) tuple per member.

The 9-byte prefix: `\\x01` and the IEEE-754 double big-endian for a score >= 0
(whose bit patterns already sort as the numbers do), `\\x00` and the same bytes
inverted for a negative one (which then sort the other way round, as needed).
0 and -0 are equal scores, so both pack as +0 (store/zset.py says how a big set
still answers -0).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Final

PREFIX: Final = 9  # bytes of a packed key before the member
_DOUBLE: Final = struct.Struct(">d")
_POSITIVE_PREFIX: Final = struct.Struct(">Bd")  # \x01 and the double: one object, not two
_ZERO: Final = b"\x01" + _DOUBLE.pack(0.0)
_NEGATIVE: Final = b"\x00"
_INVERT: Final = bytes(255 - i for i in range(256))
_MEMBER = itemgetter(slice(PREFIX, None))  # a packed key's member


class _Last:
    """The last positive score packed and its prefix: the ZADDs of one pipeline share
    the clock (fifty leases of one CLAIM end at the same time), and a `Struct.pack`
    is a method call of ~600 instructions where a float compare is a few."""

    __slots__ = ("score", "prefix")

    def __init__(self) -> None:
        self.score = 0.0  # never a positive score: the first pack fills it
        self.prefix = b""


_LAST: Final = _Last()


def pack(score: float, member: bytes) -> bytes:
    """The key that sorts as (score, member) sorts; -0 packs as 0, NaN is never given."""
    if score > 0:
        last = _LAST
        if score != last.score:  # equal positive doubles have equal bits
            last.prefix = _POSITIVE_PREFIX.pack(1, score)
            last.score = score
        return last.prefix + member
    if score == 0:
        return _ZERO + member
    return _NEGATIVE + _DOUBLE.pack(score).translate(_INVERT) + member


def score_of(key: bytes) -> float:
    """The score a packed key holds (-0 comes back as 0)."""
    return score_at(key, 0)


def score_at(data: bytes, at: int) -> float:
    """The score of the packed key that starts at `data[at]`, without slicing the key out."""
    score: float
    if data[at]:
        (score,) = _DOUBLE.unpack_from(data, at + 1)
    else:
        (score,) = _DOUBLE.unpack(data[at + 1:at + PREFIX].translate(_INVERT))
    return score


def members_of(keys: Iterable[bytes]) -> Iterator[bytes]:
    """The members of packed keys, lazily, each sliced out in C (ZRANGE without scores)."""
    return map(_MEMBER, keys)
