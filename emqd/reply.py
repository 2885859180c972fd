"""The values a command can reply with, before encoding.

Plain Python values carry most replies: `bytes` is a bulk string, `int` an
integer, `str` a simple string (`OK`), `float` a double, `None` a null bulk,
`list` an array, `dict` a map (a flat array under RESP2, as HGETALL does),
`ReplyError` an error. The few RESP shapes that need more are the classes
here. The codec in `wire/resp.py` is the only place that turns them into bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class _NullArray:
    """RESP2's `*-1` (a nil multi-bulk, as BLPOP's timeout); RESP3's `_`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()


@dataclass(frozen=True, slots=True)
class Verbatim:
    """RESP3 verbatim string (`=`), a bulk string under RESP2 (INFO, CLIENT INFO)."""

    text: bytes
    format: bytes = b"txt"


@dataclass(frozen=True, slots=True)
class Set:
    """RESP3 set (`~`), an array under RESP2."""

    items: Sequence[object]


@dataclass(frozen=True, slots=True)
class Raw:
    """Bytes already encoded, identical under RESP2 and RESP3."""

    data: bytes
