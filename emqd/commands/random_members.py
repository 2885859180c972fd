"""HRANDFIELD and ZRANDMEMBER, as Redis 7.0 answers them.

HRANDFIELD key [count [WITHVALUES]] / ZRANDMEMBER key [count [WITHSCORES]]

Without a count: one random field (member) as a bulk string, nil for no key.
With one (an array, empty for no key): 0 answers nothing; a positive count
that covers the whole value answers all of it in its order (a sorted set's
from the highest score down, a hash's field order); a smaller positive count answers that many
distinct ones, in a random order; a negative count answers -count picks
that may repeat. WITHVALUES / WITHSCORES pair each with its value: nested
[field, value] arrays under RESP3, a flat array under RESP2, as Redis does.

The count is read before the key (Redis's order): not an integer, or
-2**63, is refused; with WITHVALUES / WITHSCORES it must lie within +-(2**62 - 1).
A big answer (reply.STREAM_MIN items and more) is a `Stream` made while the
client reads it, from a snapshot of the value, so a count of a billion costs
what the client takes; the one shape a Stream cannot carry, RESP3's nested
[field, value] pairs of HRANDFIELD, is built whole and so refused past
`BUILT_MAX` picks (docs/SERVER.md).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, Final

from emqd import errors
from emqd.command import command
from emqd.compat.numbers import INT64_MAX, parse_int
from emqd.core import Session
from emqd.reply import SCORED, STREAM_MIN, Reply, Stream
from emqd.store import hash as hashes

_HALF: Final = INT64_MAX // 2  # C's LONG_MAX/2: the bound of a count with values
BUILT_MAX: Final = 1 << 24  # picks of a reply built whole (RESP3 HRANDFIELD WITHVALUES)


def _count(argv: list[bytes], word: bytes) -> tuple[int, bool]:
    """The count and whether `word` (WITHVALUES / WITHSCORES) follows, in Redis's checks."""
    count = parse_int(argv[2])
    if count is None:
        raise errors.NOT_INTEGER()
    if count < -INT64_MAX:
        raise errors.COUNT_RANGE()
    if len(argv) > 4 or (len(argv) == 4 and argv[3].lower() != word):
        raise errors.SYNTAX()
    paired = len(argv) == 4
    if paired and not -_HALF <= count <= _HALF:
        raise errors.OUT_OF_RANGE()
    return count, paired


def _picks(size: int, count: int, scored: bool) -> list[int] | Iterator[int] | range:
    """The positions to answer: all of them (a sorted set's from the highest: Redis's
    zuiNext walks a set backwards), distinct ones, or repeating ones (an iterator,
    made as it is read: the count may be huge)."""
    if count < 0:
        return (random.randrange(size) for _ in range(-count))
    if count >= size:
        return range(size - 1, -1, -1) if scored else range(size)
    return random.sample(range(size), count)


def _answer(session: Session, items: list[Any], count: int, paired: bool,
            scored: bool) -> Reply:
    """The reply for `items` (members, or (score, member) / (field, value) pairs)."""
    if count == 0 or not items:
        return []
    picks = _picks(len(items), count, scored)
    n = -count if count < 0 else min(count, len(items))
    chosen = (items[i] for i in picks)
    if not paired:
        return Stream(chosen, n) if n >= STREAM_MIN else list(chosen)
    if scored:  # (score, member): a Stream's SCORED form in both protocols
        if n >= STREAM_MIN:
            return Stream(chosen, n, SCORED)
        if session.resp == 3:
            return [[member, score] for score, member in chosen]
        return [x for score, member in chosen for x in (member, score)]
    if session.resp == 2:  # (field, value), flat
        flat = (x for pair in chosen for x in pair)
        return Stream(flat, 2 * n) if n >= STREAM_MIN else list(flat)
    if n > BUILT_MAX:
        raise errors.OUT_OF_RANGE()
    return [list(pair) for pair in chosen]


def hrandfield(session: Session, argv: list[bytes]) -> Reply:
    """HRANDFIELD key [count [WITHVALUES]]"""
    keyspace = session.core.keyspace
    if len(argv) == 2:
        row = keyspace.hash(argv[1])
        return None if row is None else random.choice(list(hashes.names(row)))
    count, paired = _count(argv, b"withvalues")
    row = keyspace.hash(argv[1])
    if row is None:
        return []
    items: list[Any] = list(hashes.items(row)) if paired else list(hashes.names(row))
    return _answer(session, items, count, paired, False)


def zrandmember(session: Session, argv: list[bytes]) -> Reply:
    """ZRANDMEMBER key [count [WITHSCORES]]"""
    keyspace = session.core.keyspace
    if len(argv) == 2:
        zset = keyspace.zset(argv[1])
        if zset is None:
            return None
        rank = random.randrange(len(zset))
        return next(iter(zset.walk(rank, rank + 1)))[1]
    count, paired = _count(argv, b"withscores")
    zset = keyspace.zset(argv[1])
    if zset is None:
        return []
    items: list[Any] = list(zset) if paired else list(zset.members())
    return _answer(session, items, count, paired, True)


COMMANDS: Final = [
    command("hrandfield", -2, "readonly", hrandfield, (1, 1, 1), group="hash",
            summary="Returns one or more random fields from a hash."),
    command("zrandmember", -2, "readonly", zrandmember, (1, 1, 1), group="sorted-set",
            summary="Returns one or more random members from a sorted set."),
]
