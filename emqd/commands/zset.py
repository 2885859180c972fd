"""Sorted-set commands (protocol section 7), answering as Redis 7.0 does, byte for byte.

ZADD ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT ZLEXCOUNT ZRANK ZREVRANK, the
range family (ZRANGE with BYSCORE / BYLEX / REV / LIMIT / WITHSCORES, and
ZRANGEBYSCORE ZREVRANGE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX), ZRANGESTORE,
ZPOPMIN ZPOPMAX ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZSCAN. The set
algebra (ZUNION, ZINTER, ZDIFF and their STOREs, ZINTERCARD) is in
zset_algebra.py, the multi-key and blocking pops in zset_pops.py, ZRANDMEMBER
in random_members.py.

Every write returns a `Plan` of plain ops with resolved values: `ZADD key
score member ...` (no flags; ZINCRBY and ZADD INCR log the new score) and
`ZREM key member ...` (the pops and ZREMRANGEBY* log the members they took);
a *STORE command logs `DEL dst` and one ZADD of the result (`stored`).
A score travels as `numbers.score_arg` makes it: an int when exact, else a
float that the append-only file writes as its `repr`, which round-trips.
Everything is checked, in Redis's order, before a plan is returned.

Scores are read three ways (see `emqd/compat/numbers.py`): ZADD / ZINCRBY scores as
getDoubleFromObject, range bounds as zslParseRange, ranks and LIMIT as
string2ll. Replies: a score is a `float` (a bulk string under RESP2, a `,`
double under RESP3); WITHSCORES and the pops with a count give nested
[member, score] pairs under RESP3 and a flat array under RESP2, as Redis does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from emqd import errors
from emqd.command import command
from emqd.commit.plan import Plan, removal
from emqd.compat import scan
from emqd.compat.numbers import (
    format_double,
    format_listpack_score,
    parse_float,
    parse_int,
    parse_score_bound,
    score_arg,
)
from emqd.core import Session
from emqd.reply import SCORED, STREAM_MIN, Reply, Stream, array
from emqd.store.zset import MINUS_INF, PLUS_INF, LexBound, LexRange, ZSet, members_of


def _zset(session: Session, key: bytes) -> ZSet | None:
    return session.core.keyspace.zset(key)


def _int(arg: bytes) -> int:
    number = parse_int(arg)
    if number is None:
        raise errors.NOT_INTEGER()
    return number


def _score(arg: bytes) -> float:
    number = parse_float(arg)
    if number is None:
        raise errors.NOT_FLOAT()
    return number


def _score_range(low: bytes, high: bytes) -> tuple[float, float, bool, bool]:
    lo = parse_score_bound(low)
    hi = parse_score_bound(high)
    if lo is None or hi is None:
        raise errors.SCORE_RANGE_NOT_FLOAT()
    return lo[0], hi[0], lo[1], hi[1]


def _lex_bound(arg: bytes) -> tuple[LexBound, bool] | None:
    """zslParseLexRangeItem: `-`, `+`, `(member` or `[member`."""
    head = arg[:1]
    if head == b"-" or head == b"+":
        if len(arg) > 1 and arg[1] != 0:  # C stops reading at a NUL byte
            return None
        return (MINUS_INF if head == b"-" else PLUS_INF), True
    if head == b"(":
        return arg[1:], True
    if head == b"[":
        return arg[1:], False
    return None


def _lex_range(low: bytes, high: bytes) -> LexRange:
    lo = _lex_bound(low)
    hi = _lex_bound(high)
    if lo is None or hi is None:
        raise errors.LEX_RANGE_INVALID()
    return LexRange(lo[0], hi[0], lo[1], hi[1])


def with_scores(session: Session, pairs: Iterable[tuple[float, bytes]]) -> list[Any]:
    """[member, score] pairs nested under RESP3, flattened under RESP2."""
    if session.resp == 3:
        return [[member, score] for score, member in pairs]
    out: list[Any] = []
    for score, member in pairs:
        out += (member, score)
    return out


# --- ZADD / ZINCRBY ------------------------------------------------------------
_ZADD_FLAGS = frozenset({b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"})


def zadd(session: Session, argv: list[bytes]) -> Plan | int | None:
    """ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].

    Returns the number of members added (added + updated with CH), or with
    INCR the new score (nil when NX / XX / GT / LT skipped it).
    Errors: syntax error for a missing or odd score/member list, the three
    incompatibility errors, `not a valid float`, WRONGTYPE, and NaN from INCR.
    """
    i = 2
    flags: set[bytes] = set()
    while i < len(argv) and (flag := argv[i].lower()) in _ZADD_FLAGS:
        flags.add(flag)
        i += 1
    elements = len(argv) - i
    if elements % 2 or not elements:
        raise errors.SYNTAX()
    nx, xx, gt, lt = b"nx" in flags, b"xx" in flags, b"gt" in flags, b"lt" in flags
    incr = b"incr" in flags
    if nx and xx:
        raise errors.ZADD_XX_NX()
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise errors.ZADD_GT_LT_NX()
    if incr and elements > 2:
        raise errors.ZADD_INCR_PAIRS()
    pairs = [(_score(argv[j]), argv[j + 1]) for j in range(i, len(argv), 2)]
    return _add(session, argv[1], pairs, nx=nx, xx=xx, gt=gt, lt=lt, incr=incr,
                ch=b"ch" in flags)


def zincrby(session: Session, argv: list[bytes]) -> Plan | int | None:
    """ZINCRBY key increment member -> the new score (ZADD INCR's path, as in Redis)."""
    return _add(session, argv[1], [(_score(argv[2]), argv[3])], incr=True)


def _add(session: Session, key: bytes, pairs: list[tuple[float, bytes]], *, nx: bool = False,
         xx: bool = False, gt: bool = False, lt: bool = False, incr: bool = False,
         ch: bool = False) -> Plan | int | None:
    """zsetAdd over each pair in turn, as a plan: one op pair per effective change, in order."""
    zset = _zset(session, key)
    if zset is None and xx:
        return None if incr else 0
    seen: dict[bytes, float] = {}  # scores this command already set
    changes: list[Any] = []
    added = updated = processed = 0
    new_score: float = 0.0
    for score, member in pairs:
        current = seen.get(member)
        if current is None and zset is not None:
            current = zset.score(member)
        if current is None:
            if xx:
                continue
            added += 1
        else:
            if nx:
                continue
            if incr:
                score += current
                if math.isnan(score):
                    raise errors.SCORE_NAN()
            if (lt and score >= current) or (gt and score <= current):
                continue
            if score == current:
                processed += 1
                new_score = score
                continue
            updated += 1
        processed += 1
        new_score = score
        seen[member] = score
        changes += (score_arg(score), member)
    plan = Plan([(b"ZADD", key, *changes)] if changes else [])
    if incr:
        plan.reply = new_score if processed else None
    else:
        plan.reply = added + updated if ch else added
    return plan


# --- single-member reads and ZREM ------------------------------------------------
def zrem(session: Session, argv: list[bytes]) -> Plan | int:
    """ZREM key member [member ...] -> the number removed; the key goes with its last member."""
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    return removal((b"ZREM", argv[1]), zset.keys, argv[2:])


def zscore(session: Session, argv: list[bytes]) -> Reply:
    zset = _zset(session, argv[1])
    return None if zset is None else zset.score(argv[2])


def zmscore(session: Session, argv: list[bytes]) -> Reply:
    zset = _zset(session, argv[1])
    if zset is None:
        return [None] * (len(argv) - 2)
    return [zset.score(member) for member in argv[2:]]


def zcard(session: Session, argv: list[bytes]) -> Reply:
    zset = _zset(session, argv[1])
    return 0 if zset is None else len(zset)


def _rank(session: Session, argv: list[bytes], reverse: bool) -> Reply:
    zset = _zset(session, argv[1])
    if zset is None:
        return None
    rank = zset.rank(argv[2])
    if rank is None:
        return None
    return len(zset) - 1 - rank if reverse else rank


def zrank(session: Session, argv: list[bytes]) -> Reply:
    return _rank(session, argv, False)


def zrevrank(session: Session, argv: list[bytes]) -> Reply:
    return _rank(session, argv, True)


def zcount(session: Session, argv: list[bytes]) -> Reply:
    """ZCOUNT key min max -> how many scores lie in the range (`(` excludes a bound)."""
    low, high, low_ex, high_ex = _score_range(argv[2], argv[3])
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    start, stop = zset.score_span(low, high, low_ex, high_ex)
    return stop - start


def zlexcount(session: Session, argv: list[bytes]) -> Reply:
    """ZLEXCOUNT key min max -> how many members lie in the lexicographic range."""
    lex = _lex_range(argv[2], argv[3])
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    return zset.lex_count(lex)


# --- the range family ------------------------------------------------------------
RANK, SCORE, LEX = "rank", "score", "lex"


class _Range:
    """A parsed ZRANGE request: what to walk (`kind`, `reverse`, `offset`, `limit`,
    `bounds`: ranks, scores or a LexRange) and how to answer (`withscores`)."""

    __slots__ = ("kind", "reverse", "withscores", "offset", "limit", "bounds")

    def __init__(self, kind: str, reverse: bool, withscores: bool, offset: int, limit: int,
                 bounds: Any) -> None:
        self.kind = kind
        self.reverse = reverse
        self.withscores = withscores
        self.offset = offset
        self.limit = limit
        self.bounds = bounds

    def span(self, zset: ZSet) -> tuple[int, int] | None:
        """The ranks a rank or score range covers, paged by LIMIT; None when empty."""
        if self.kind == RANK:
            start, end = self.bounds
            return _by_rank(zset, start, end, self.reverse)
        first, stop = zset.score_span(*self.bounds)
        return _page(first, stop, self.reverse, self.offset, self.limit)

    def pairs(self, zset: ZSet) -> Iterable[tuple[float, bytes]]:
        """The (score, member) pairs of the range, in the reply's order."""
        if self.kind == LEX:
            return _lex_page(zset, self.bounds, self.reverse, self.offset, self.limit)
        span = self.span(zset)
        return [] if span is None else zset.walk(*span, self.reverse)


def _parse_range(argv: list[bytes], at: int, kind: str | None, reverse: bool | None,
                 store: bool = False) -> _Range:
    """Redis's zrangeGenericCommand up to the key's lookup: the options after the key
    (at `at`) and its two bounds, their conflicts, then the bounds themselves.

    `kind` / `reverse` are None where ZRANGE lets an option choose them
    (BYSCORE / BYLEX, REV); a command that fixes them refuses the option.
    ZRANGESTORE (`store`) refuses WITHSCORES.
    """
    withscores = False
    offset, limit = 0, -1
    j = at + 3
    while j < len(argv):
        option = argv[j].lower()
        if not store and option == b"withscores":
            withscores = True
        elif option == b"limit" and len(argv) - j - 1 >= 2:
            offset = _int(argv[j + 1])
            limit = _int(argv[j + 2])
            j += 2
        elif reverse is None and option == b"rev":
            reverse = True
        elif kind is None and option == b"bylex":
            kind = LEX
        elif kind is None and option == b"byscore":
            kind = SCORE
        else:
            raise errors.SYNTAX()
        j += 1
    reverse = bool(reverse)
    kind = kind or RANK
    if limit != -1 and kind == RANK:
        raise errors.ZRANGE_LIMIT_RANK()
    if withscores and kind == LEX:
        raise errors.ZRANGE_WITHSCORES_LEX()
    low, high = argv[at + 1], argv[at + 2]
    if reverse and kind != RANK:
        low, high = high, low
    bounds: Any
    if kind == RANK:
        bounds = (_int(low), _int(high))
    elif kind == SCORE:
        bounds = _score_range(low, high)
    else:
        bounds = _lex_range(low, high)
    return _Range(kind, reverse, withscores, offset, limit, bounds)


def _range(session: Session, argv: list[bytes], kind: str | None, reverse: bool | None) -> Reply:
    """Z[REV]RANGE[BYSCORE|BYLEX]: the parsed range, then the key."""
    query = _parse_range(argv, 1, kind, reverse)
    zset = _zset(session, argv[1])
    if zset is None:
        return []
    withscores = query.withscores
    if query.kind != LEX:
        span = query.span(zset)
        if span is None:
            return []
        size = span[1] - span[0]
        if size >= STREAM_MIN:  # a big range: a snapshot of its packed keys, encoded lazily
            keys = zset.span(*span, query.reverse)
            if withscores:
                return Stream(zset.pairs_of(keys), size, SCORED)
            return Stream(members_of(keys), size)
        if not withscores:
            return list(members_of(zset.span(*span, query.reverse)))
    pairs = query.pairs(zset)
    if withscores:
        return with_scores(session, pairs)
    return array([member for _, member in pairs])  # BYLEX: its list, streamed when big


def zrangestore(session: Session, argv: list[bytes]) -> Plan:
    """ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].

    Returns how many members dst now holds. dst is replaced whatever it held
    (deleted when the range is empty), logged as DEL dst and one ZADD.
    """
    query = _parse_range(argv, 2, None, None, store=True)
    zset = _zset(session, argv[2])
    pairs = [] if zset is None else list(query.pairs(zset))
    return stored(session, argv[1], pairs)


def stored(session: Session, key: bytes, pairs: list[tuple[float, bytes]]) -> Plan:
    """The plan that makes `key` the sorted set of `pairs` (distinct members), whatever it
    held: DEL and one ZADD, or only the DEL (of a key that exists) when `pairs` is
    empty. The reply is the number of members, as every *STORE command answers.

    Redis builds the result as a skiplist and makes it a listpack only if it fits,
    so a result too big for one keeps its -0 scores, where a ZADD into a new key
    stores -0 as 0 while the set is still a listpack. Such members are added
    with the score 1 first, then set to -0 by a second ZADD, once the set is a
    skiplist: the same set, in emqd and in Redis replaying the log."""
    keyspace = session.core.keyspace
    ops: list[Any] = []
    if key in keyspace:
        ops.append((b"DEL", key))
    if not pairs:
        return Plan(ops, 0)
    limits = keyspace.limits
    skiplist = len(pairs) > limits.zset_entries or any(
        len(member) > limits.zset_value for _, member in pairs)
    zeros = [member for score, member in pairs
             if skiplist and score == 0 and math.copysign(1.0, score) < 0]
    placeholder = set(zeros)
    ops.append((b"ZADD", key, *[x for score, member in pairs
                                for x in (1 if member in placeholder else score_arg(score),
                                          member)]))
    if zeros:
        ops.append((b"ZADD", key, *[x for member in zeros for x in (-0.0, member)]))
    return Plan(ops, len(pairs))


def _clamp_ranks(length: int, start: int, end: int) -> tuple[int, int] | None:
    """Redis's index sanitising: negative counts from the end; None for an empty range."""
    if start < 0:
        start += length
    if end < 0:
        end += length
    if start < 0:
        start = 0
    if start > end or start >= length:
        return None
    return start, min(end, length - 1)


def _by_rank(zset: ZSet, start: int, end: int, reverse: bool) -> tuple[int, int] | None:
    """The ascending ranks [start, stop) of ZRANGE's indexes (counted from the high end
    when reverse); None when empty."""
    ranks = _clamp_ranks(len(zset), start, end)
    if ranks is None:
        return None
    start, end = ranks
    if reverse:
        n = len(zset)
        return n - 1 - end, n - start
    return start, end + 1


def _page(start: int, stop: int, reverse: bool, offset: int,
          limit: int) -> tuple[int, int] | None:
    """The ranks of [start, stop) walked from the low end (or the high end when
    reverse), skipping `offset` and taking at most `limit` (a negative limit takes
    all, a negative offset nothing: Redis walks off the end); None when empty."""
    if offset < 0 or limit == 0:
        return None
    if reverse:
        stop -= offset
        if limit > 0:
            start = max(start, stop - limit)
    else:
        start += offset
        if limit > 0:
            stop = min(stop, start + limit)
    if start >= stop:
        return None
    return start, stop


def _lex_page(zset: ZSet, lex: LexRange, reverse: bool, offset: int,
              limit: int) -> list[tuple[float, bytes]]:
    """Redis's lex walk: from the first (last when reverse) member in range, skip
    `offset` members unchecked, then take members while they stay within the far
    bound, at most `limit` (negative: all)."""
    first = zset.lex_last(lex) if reverse else zset.lex_first(lex)
    if first is None or offset < 0 or limit == 0:
        return []
    if reverse:
        if first - offset < 0:
            return []
        pairs = zset.walk(0, first - offset + 1, reverse=True)
        inside = lex.gte_min
    else:
        pairs = zset.walk(first + offset, len(zset))
        inside = lex.lte_max
    out: list[tuple[float, bytes]] = []
    for pair in pairs:
        if not inside(pair[1]) or len(out) == limit:
            break
        out.append(pair)
    return out


def zrange(session: Session, argv: list[bytes]) -> Reply:
    """ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]."""
    return _range(session, argv, None, None)


def zrangebyscore(session: Session, argv: list[bytes]) -> Reply:
    """ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]."""
    return _range(session, argv, SCORE, False)


def zrevrangebyscore(session: Session, argv: list[bytes]) -> Reply:
    """ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]."""
    return _range(session, argv, SCORE, True)


def zrevrange(session: Session, argv: list[bytes]) -> Reply:
    """ZREVRANGE key start stop [WITHSCORES]."""
    return _range(session, argv, RANK, True)


def zrangebylex(session: Session, argv: list[bytes]) -> Reply:
    """ZRANGEBYLEX key min max [LIMIT offset count]."""
    return _range(session, argv, LEX, False)


def zrevrangebylex(session: Session, argv: list[bytes]) -> Reply:
    """ZREVRANGEBYLEX key max min [LIMIT offset count]."""
    return _range(session, argv, LEX, True)


# --- removals ----------------------------------------------------------------------
def _pop(session: Session, argv: list[bytes], highest: bool) -> Plan | list[Any]:
    """ZPOPMIN / ZPOPMAX key [count] -> the pairs taken, logged as one ZREM."""
    if len(argv) > 3:
        raise errors.SYNTAX()
    count = None
    if len(argv) == 3:
        count = parse_int(argv[2])  # Redis gives one text for "not an integer" and "< 0"
        if count is None or count < 0:
            raise errors.VALUE_NOT_POSITIVE()
    zset = _zset(session, argv[1])
    if zset is None or count == 0:
        return []
    pairs = popped(zset, 1 if count is None else count, highest)
    plan = Plan([(b"ZREM", argv[1], *[member for _, member in pairs])])
    if session.resp == 3 and count is not None:
        plan.reply = [[member, score] for score, member in pairs]
    else:
        plan.reply = [item for score, member in pairs for item in (member, score)]
    return plan


def popped(zset: ZSet, count: int, highest: bool) -> list[tuple[float, bytes]]:
    """The (score, member) pairs a pop of `count` takes, in the order it answers them:
    lowest first, or highest first when `highest`."""
    n = min(len(zset), count)
    return list(zset.walk(len(zset) - n, len(zset), True) if highest else zset.walk(0, n))


def zpopmin(session: Session, argv: list[bytes]) -> Plan | list[Any]:
    return _pop(session, argv, False)


def zpopmax(session: Session, argv: list[bytes]) -> Plan | list[Any]:
    return _pop(session, argv, True)


def _remove_span(key: bytes, zset: ZSet, start: int, stop: int) -> Plan:
    members = [member for _, member in zset.walk(start, stop)]
    return Plan([(b"ZREM", key, *members)] if members else [], len(members))


def zremrangebyscore(session: Session, argv: list[bytes]) -> Plan | int:
    """ZREMRANGEBYSCORE key min max -> the number removed, logged as one ZREM."""
    bounds = _score_range(argv[2], argv[3])
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    return _remove_span(argv[1], zset, *zset.score_span(*bounds))


def zremrangebyrank(session: Session, argv: list[bytes]) -> Plan | int:
    """ZREMRANGEBYRANK key start stop -> the number removed, logged as one ZREM."""
    start, end = _int(argv[2]), _int(argv[3])
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    ranks = _clamp_ranks(len(zset), start, end)
    if ranks is None:
        return 0
    return _remove_span(argv[1], zset, ranks[0], ranks[1] + 1)


def zremrangebylex(session: Session, argv: list[bytes]) -> Plan | int:
    """ZREMRANGEBYLEX key min max -> the number removed, logged as one ZREM: the members
    ZRANGEBYLEX key min max lists (Redis's walk, see `_lex_page`)."""
    lex = _lex_range(argv[2], argv[3])
    zset = _zset(session, argv[1])
    if zset is None:
        return 0
    members = [member for _, member in _lex_page(zset, lex, False, 0, -1)]
    return Plan([(b"ZREM", argv[1], *members)] if members else [], len(members))


# --- ZSCAN ---------------------------------------------------------------------------
def zscan(session: Session, argv: list[bytes]) -> Reply:
    """ZSCAN key cursor [MATCH pattern] [COUNT count] -> [cursor, [member, score, ...]].

    A set Redis would hold as a listpack (or one of at most scan.SMALL members)
    comes whole, in order, with cursor 0; a bigger one is paged through its
    index (`scan.page`), which a member's score does not move in. Scores are
    bulk strings even under RESP3, in the text Redis's encoding holds them in
    (see numbers.py).
    """
    cursor = scan.cursor_arg(argv[2])
    zset = _zset(session, argv[1])
    if zset is None:
        return [b"0", []]
    count, pattern = scan.parse_options(argv, 3)
    text = format_listpack_score if zset.listpack else format_double
    paged = None if zset.listpack else scan.page(zset, zset.keys, cursor, count)
    cursor, members = (0, list(zset.members())) if paged is None else paged
    items: list[bytes] = []
    for member in members:
        if pattern is None or pattern(member):
            score = zset.score(member)
            assert score is not None  # a member of the set
            items += (member, text(score))
    return [b"%d" % cursor, items]


COMMANDS = [
    command("zadd", -4, "write denyoom fast", zadd, (1, 1, 1), group="sorted-set"),
    command("zincrby", 4, "write denyoom fast", zincrby, (1, 1, 1), group="sorted-set"),
    command("zrem", -3, "write fast", zrem, (1, 1, 1), group="sorted-set"),
    command("zscore", 3, "readonly fast", zscore, (1, 1, 1), group="sorted-set"),
    command("zmscore", -3, "readonly fast", zmscore, (1, 1, 1), group="sorted-set"),
    command("zcard", 2, "readonly fast", zcard, (1, 1, 1), group="sorted-set"),
    command("zcount", 4, "readonly fast", zcount, (1, 1, 1), group="sorted-set"),
    command("zlexcount", 4, "readonly fast", zlexcount, (1, 1, 1), group="sorted-set"),
    command("zrank", 3, "readonly fast", zrank, (1, 1, 1), group="sorted-set"),
    command("zrevrank", 3, "readonly fast", zrevrank, (1, 1, 1), group="sorted-set"),
    command("zrange", -4, "readonly", zrange, (1, 1, 1), group="sorted-set"),
    command("zrangebyscore", -4, "readonly", zrangebyscore, (1, 1, 1), group="sorted-set"),
    command("zrevrange", -4, "readonly", zrevrange, (1, 1, 1), group="sorted-set"),
    command("zrevrangebyscore", -4, "readonly", zrevrangebyscore, (1, 1, 1), group="sorted-set"),
    command("zrangebylex", -4, "readonly", zrangebylex, (1, 1, 1), group="sorted-set"),
    command("zrevrangebylex", -4, "readonly", zrevrangebylex, (1, 1, 1), group="sorted-set"),
    command("zpopmin", -2, "write fast", zpopmin, (1, 1, 1), group="sorted-set"),
    command("zpopmax", -2, "write fast", zpopmax, (1, 1, 1), group="sorted-set"),
    command("zremrangebyscore", 4, "write", zremrangebyscore, (1, 1, 1), group="sorted-set"),
    command("zremrangebyrank", 4, "write", zremrangebyrank, (1, 1, 1), group="sorted-set"),
    command("zscan", -3, "readonly", zscan, (1, 1, 1), group="sorted-set"),
    command("zremrangebylex", 4, "write", zremrangebylex, (1, 1, 1), group="sorted-set",
            summary="Removes members in a sorted set within a lexicographical range. Deletes "
                    "the sorted set if all members were removed."),
    command("zrangestore", -5, "write denyoom", zrangestore, (1, 2, 1), group="sorted-set",
            summary="Stores a range of members from sorted set in a key."),
]
