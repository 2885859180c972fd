"""The values a command can reply with, before encoding.

Plain Python values carry most replies: `bytes` is a bulk string, `int` an
integer, `str` a simple string (`OK`), `float` a double, `None` a null bulk,
`list` an array, `dict` a map (a flat array under RESP2, as HGETALL does),
`ReplyError` an error. The few RESP shapes that need more are the classes
here. The codec in `wire/resp.py` is the only place that turns them into bytes.
`Reply` is the union of them all, what a command handler answers with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from emqd.errors import ReplyError


class _NullArray:
    """RESP2's `*-1` (a nil multi-bulk, as BLPOP's timeout); RESP3's `_`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY: Final = _NullArray()


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


STREAM_MIN: Final = 1024  # items from which a reply is a Stream (KEYS, HGETALL, ZRANGE, ...)
BULKS, PAIRS, SCORED = 0, 1, 2  # what a Stream's items are (see Stream.form)


@dataclass(frozen=True, slots=True)
class Stream:
    """A big array or map, encoded a chunk at a time as the client takes it
    (wire/protocol.py): the whole reply is never built twice, nor held whole for a
    client that reads slowly, and other clients are served between two chunks.

    So `items` must not read the live store: it is a snapshot taken when the
    command ran (lists of the immutable bytes the reply shows, or an iterator
    over such a list), since other commands run before its last chunk is made.
    `count`: how many items; `form`: BULKS (bytes: an array of bulk strings),
    PAIRS (a (names, values) pair of lists: a RESP3 map, a flat array under
    RESP2, as HGETALL answers) or SCORED ((score, member) pairs: WITHSCORES'
    [member, score] arrays under RESP3, member and score flat under RESP2).
    """

    items: Iterable[object]
    count: int
    form: int = BULKS


# What a command replies with. An array's items and a map's entries are replies too,
# but list and dict are invariant: `list[Any]` lets a handler answer a `list[bytes]`.
Reply = (bytes | int | float | str | None | list[Any] | tuple[Any, ...] | dict[Any, Any]
         | ReplyError | _NullArray | Verbatim | Set | Raw | Stream)


def array(items: list[bytes]) -> list[bytes] | Stream:
    """An array of bulk strings (a list nothing else holds), as a Stream when it is big."""
    return Stream(items, len(items)) if len(items) >= STREAM_MIN else items
