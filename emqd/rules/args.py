"""Reading verb arguments: names, ids, integers and options, with the protocol's errors.

Every integer argument of every verb is read as Redis's string2ll reads it
(`emqd.compat.numbers.parse_int`), so `01`, `+1` and ` 1` are refused the same way
everywhere. Options are keyword/value pairs in any order; an unknown or
repeated keyword, or a keyword without its value, is `ERR syntax error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.compat.numbers import parse_int
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys

NAME_MAX: Final = 256


def _is_name(raw: bytes) -> bool:
    # Bytes tested as ints (0x7B `{`, 0x7D `}`): `b"{" in raw` goes through the
    # buffer protocol and costs 5x more, on every verb call.
    return bool(raw) and len(raw) <= NAME_MAX and 0x7B not in raw and 0x7D not in raw


def is_queue_name(raw: bytes) -> bool:
    return _is_name(raw)


def queue_name(raw: bytes) -> bytes:
    """QUEUE: 1..256 bytes without `{` or `}`."""
    if not _is_name(raw):
        raise errors.INVALID_QUEUE()
    return raw


def group_name(raw: bytes) -> bytes:
    """GROUP: the same rule as QUEUE."""
    if not _is_name(raw):
        raise errors.INVALID_GROUP()
    return raw


def job_id(raw: bytes) -> bytes:
    """ID: 1..256 bytes."""
    if not raw or len(raw) > NAME_MAX:
        raise errors.INVALID_ID()
    return raw


def positive(raw: bytes, keyword: str) -> int:
    number = parse_int(raw)
    if number is None or number <= 0:
        raise errors.must_be_positive(keyword)()
    return number


def positive_capped(raw: bytes, keyword: str, cap: int) -> int:
    """A positive integer, clamped to `cap`: COUNT and LIMIT bound the work of one call.

    A value over the cap is not refused (the verb already answers *up to* n; a
    client asks again for the rest), so no client written for an uncapped
    server breaks; PROTOCOL.md section 4 lists the caps.
    """
    return min(positive(raw, keyword), cap)


def non_negative(raw: bytes, keyword: str) -> int:
    number = parse_int(raw)
    if number is None or number < 0:
        raise errors.must_be_non_negative(keyword)()
    return number


def options(
    argv: list[bytes], start: int, keywords: frozenset[bytes], flags: frozenset[bytes] = frozenset()
) -> dict[bytes, bytes | None]:
    """Options from argv[start:]: upper-cased keyword -> raw value (None for a flag).

    `keywords` take one value; `flags` take none. Anything else, a repeat, or a
    keyword at the end without its value is `ERR syntax error`.
    """
    found: dict[bytes, bytes | None] = {}
    i, n = start, len(argv)
    while i < n:
        keyword = argv[i].upper()
        if keyword in found:
            raise errors.SYNTAX()
        if keyword in flags:
            found[keyword] = None
            i += 1
        elif keyword in keywords and i + 1 < n:
            found[keyword] = argv[i + 1]
            i += 2
        else:
            raise errors.SYNTAX()
    return found


@dataclass(frozen=True, slots=True)
class QueueSlice:
    """What a housekeeping planner that works a queue in slices is given."""

    keys: QueueKeys
    limit: int
    config: Config


def queue_slice(queue: bytes, limit: int, config: Config) -> QueueSlice:
    """A slice of at most `limit` members of a queue, as housekeeping asks for one."""
    return QueueSlice(queue_keys(queue), limit, config)
