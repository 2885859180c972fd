"""The sorted-set algebra, as Redis 7.0's zunionInterDiffGenericCommand computes it.

ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
ZDIFF numkeys key [key ...] [WITHSCORES]
ZUNIONSTORE / ZINTERSTORE dst numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]
ZDIFFSTORE dst numkeys key [key ...]
ZINTERCARD numkeys key [key ...] [LIMIT limit]

The arguments are checked in Redis's order (numkeys, the inputs' types, then
the options left to right), so a request with several faults gets Redis's
error. Scores are combined in Redis's order too, because floating-point sums
depend on it: the inputs sorted by size (a stable sort, as glibc's qsort is),
each member's first score taken from the first input that holds it, times
that input's weight, a NaN product (inf * 0) counted as 0 and a NaN sum
(inf + -inf) made 0. The result is answered in (score, member) order, scores
as doubles; a STORE replaces dst (zset.stored: DEL and one ZADD, logged as one
record) and answers the result's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Final

from emqd import errors
from emqd.command import command
from emqd.commands.zset import stored, with_scores
from emqd.commit.plan import Plan
from emqd.compat.numbers import parse_float, parse_int
from emqd.core import Session
from emqd.reply import Reply
from emqd.store.zset import ZSet

UNION, INTER, DIFF = "union", "inter", "diff"
Pairs = list[tuple[float, bytes]]


def _sum(total: float, value: float) -> float:
    total += value
    return 0.0 if math.isnan(total) else total


def _min(total: float, value: float) -> float:
    return value if value < total else total


def _max(total: float, value: float) -> float:
    return value if value > total else total


_AGGREGATES: Final[dict[bytes, Callable[[float, float], float]]] = {
    b"sum": _sum, b"min": _min, b"max": _max,
}


class _Request:
    """The inputs (None for a missing key) with their weights, the aggregate, and the options."""

    __slots__ = ("inputs", "aggregate", "withscores", "limit")

    def __init__(self, inputs: list[tuple[ZSet | None, float]]) -> None:
        self.inputs = inputs
        self.aggregate: Callable[[float, float], float] = _sum
        self.withscores = False
        self.limit = 0  # ZINTERCARD's: 0 counts them all


def _parse(session: Session, argv: list[bytes], at: int, op: str, store: bool,
           card: bool) -> _Request:
    """numkeys at `at`, the keys after it, then the options this command takes."""
    setnum = parse_int(argv[at])
    if setnum is None:
        raise errors.NOT_INTEGER()
    if setnum < 1:
        raise errors.no_input_key(argv[0].decode("latin-1").lower())
    if setnum > len(argv) - (at + 1):
        raise errors.SYNTAX()
    keyspace = session.core.keyspace
    j = at + 1
    request = _Request([(keyspace.zset(key), 1.0) for key in argv[j : j + setnum]])
    j += setnum
    algebra = op != DIFF and not card
    while j < len(argv):
        option = argv[j].lower()
        remaining = len(argv) - j
        if algebra and remaining >= setnum + 1 and option == b"weights":
            weights = []
            for arg in argv[j + 1 : j + 1 + setnum]:
                weight = parse_float(arg)
                if weight is None:
                    raise errors.WEIGHT_NOT_FLOAT()
                weights.append(weight)
            request.inputs = [(zset, weight) for (zset, _), weight
                              in zip(request.inputs, weights, strict=True)]
            j += 1 + setnum
        elif algebra and remaining >= 2 and option == b"aggregate":
            aggregate = _AGGREGATES.get(argv[j + 1].lower())
            if aggregate is None:
                raise errors.SYNTAX()
            request.aggregate = aggregate
            j += 2
        elif not store and not card and option == b"withscores":
            request.withscores = True
            j += 1
        elif card and remaining >= 2 and option == b"limit":
            limit = parse_int(argv[j + 1])
            if limit is None or limit < 0:
                raise errors.LIMIT_NEGATIVE()
            request.limit = limit
            j += 2
        else:
            raise errors.SYNTAX()
    return request


def _weighted(score: float, weight: float) -> float:
    product = score * weight
    return 0.0 if math.isnan(product) else product


def _union(request: _Request) -> Pairs:
    aggregate = request.aggregate
    totals: dict[bytes, float] = {}
    for zset, weight in sorted(request.inputs, key=_size):
        if zset is None:
            continue
        for score, member in zset:
            value = _weighted(score, weight)
            total = totals.get(member)
            totals[member] = value if total is None else aggregate(total, value)
    return _ordered(totals)


def _inter(request: _Request, limit: int | None = None) -> Pairs:
    """The intersection; with a `limit`, only its first that many members (ZINTERCARD)."""
    inputs = sorted(request.inputs, key=_size)
    first, first_weight = inputs[0]
    if first is None or not first:
        return []
    aggregate = request.aggregate
    others = inputs[1:]
    totals: dict[bytes, float] = {}
    for score, member in first:
        total = _weighted(score, first_weight)
        for zset, weight in others:
            other = None if zset is None else zset.score(member)
            if other is None:
                break
            total = aggregate(total, other * weight)  # not sanitised, as in Redis
        else:
            totals[member] = total
            if limit and len(totals) >= limit:
                break
    return _ordered(totals)


def _diff(request: _Request) -> Pairs:
    first, _ = request.inputs[0]
    if first is None:
        return []
    others = [zset for zset, _ in request.inputs[1:] if zset is not None]
    return [(score, member) for score, member in first
            if not any(member in zset for zset in others)]


def _size(item: tuple[ZSet | None, float]) -> int:
    return 0 if item[0] is None else len(item[0])


def _ordered(totals: dict[bytes, float]) -> Pairs:
    """(score, member) pairs in a sorted set's order: by score, then by member bytes."""
    return sorted((score, member) for member, score in totals.items())


_COMPUTE: Final[dict[str, Callable[[_Request], Pairs]]] = {
    UNION: _union, INTER: _inter, DIFF: _diff,
}


def _read(session: Session, argv: list[bytes], op: str) -> Reply:
    """ZUNION / ZINTER / ZDIFF (`op`): the result's members, WITHSCORES with their scores."""
    request = _parse(session, argv, 1, op, store=False, card=False)
    pairs = _COMPUTE[op](request)
    if request.withscores:
        return with_scores(session, pairs)
    return [member for _, member in pairs]


def _store(session: Session, argv: list[bytes], op: str) -> Plan:
    """ZUNIONSTORE / ZINTERSTORE / ZDIFFSTORE (`op`): dst replaced, its size answered."""
    request = _parse(session, argv, 2, op, store=True, card=False)
    return stored(session, argv[1], _COMPUTE[op](request))


def zintercard(session: Session, argv: list[bytes]) -> Reply:
    """ZINTERCARD numkeys key [key ...] [LIMIT limit] -> the intersection's size (at most
    `limit` when it is not 0)."""
    request = _parse(session, argv, 1, INTER, store=False, card=True)
    return len(_inter(request, request.limit))


_GROUP: Final = "sorted-set"
COMMANDS: Final = [
    command("zunion", -3, "readonly movablekeys", partial(_read, op=UNION), group=_GROUP,
            summary="Returns the union of multiple sorted sets."),
    command("zinter", -3, "readonly movablekeys", partial(_read, op=INTER), group=_GROUP,
            summary="Returns the intersect of multiple sorted sets."),
    command("zdiff", -3, "readonly movablekeys", partial(_read, op=DIFF), group=_GROUP,
            summary="Returns the difference between multiple sorted sets."),
    command("zunionstore", -4, "write denyoom movablekeys", partial(_store, op=UNION),
            (1, 1, 1), group=_GROUP,
            summary="Stores the union of multiple sorted sets in a key."),
    command("zinterstore", -4, "write denyoom movablekeys", partial(_store, op=INTER),
            (1, 1, 1), group=_GROUP,
            summary="Stores the intersect of multiple sorted sets in a key."),
    command("zdiffstore", -4, "write denyoom movablekeys", partial(_store, op=DIFF),
            (1, 1, 1), group=_GROUP,
            summary="Stores the difference of multiple sorted sets in a key."),
    command("zintercard", -3, "readonly movablekeys", zintercard, group=_GROUP,
            summary="Returns the number of members of the intersect of multiple sorted sets."),
]
