"""The multi-key and blocking sorted-set pops, as Redis 7.0 answers them.

ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
BZPOPMIN key [key ...] timeout / BZPOPMAX key [key ...] timeout

Each pops from the first of its keys that holds members (a missing key is
passed over; a key of another type before that one is WRONGTYPE), and logs
what it took as one ZREM, as ZPOPMIN does. Replies: ZMPOP / BZMPOP give
[key, [[member, score], ...]] (nested in both protocols); BZPOPMIN / BZPOPMAX
give [key, member, score]; all give a null array when nothing was there.

A blocking pop that finds every key empty returns a `Block` on its keys,
parked and woken as `EMQ.CLAIM ... BLOCK` is (wire/protocol.py): a write to
one of the keys runs the command again, and the timeout answers the null
array. Inside MULTI it does not wait, and answers the null array at once (the
dispatcher gives a Block's `timeout_reply` there), as Redis does. The timeout
is seconds as Redis reads them (`timeout_ms`).
"""

from __future__ import annotations

import math
from typing import Final

from emqd import clock, errors
from emqd.command import command
from emqd.commands.zset import popped
from emqd.commit.plan import Block, Plan
from emqd.compat import longdouble
from emqd.compat.numbers import INT64_MAX, parse_int
from emqd.core import Session
from emqd.reply import NULL_ARRAY, Reply
from emqd.store.zset import ZSet


def timeout_ms(arg: bytes) -> int:
    """getTimeoutFromObjectOrReply in seconds: `ceill(seconds * 1000)` in long double,
    0 for "wait for ever". A value past what a C long long holds converts to its
    minimum (x87's), so +-inf and 1e300 are "negative" as in Redis; a deadline past
    the clock's range never comes, so it waits for ever too."""
    seconds = longdouble.parse(arg)
    if seconds is None:
        raise errors.TIMEOUT_NOT_FLOAT()
    product = longdouble.multiply(seconds, 1000)
    if isinstance(product, float):
        raise errors.TIMEOUT_NEGATIVE()
    ms = math.ceil(product)
    if ms > INT64_MAX or ms < -INT64_MAX - 1 or ms < 0:
        raise errors.TIMEOUT_NEGATIVE()
    if ms > INT64_MAX - clock.now_ms():
        return 0
    return ms


def _first_full(session: Session, keys: list[bytes]) -> tuple[bytes, ZSet] | None:
    """The first key holding a sorted set; WRONGTYPE for another type met before it,
    except for a parked client woken by a write: Redis serves it only from a key
    that holds a sorted set, and it waits on while none does."""
    keyspace = session.core.keyspace
    for key in keys:
        if session.waking and keyspace.type_name(key) != "zset":
            continue
        zset = keyspace.zset(key)
        if zset is not None:
            return key, zset
    return None


def _pop_from(key: bytes, zset: ZSet, highest: bool, count: int, nested: bool,
              session: Session) -> Plan:
    pairs = popped(zset, count, highest)
    plan = Plan([(b"ZREM", key, *[member for _, member in pairs])])
    if nested:
        plan.reply = [key, [[member, score] for score, member in pairs]]
    else:
        plan.reply = [key, *[item for score, member in pairs for item in (member, score)]]
    return plan


def _mpop_args(argv: list[bytes], at: int) -> tuple[list[bytes], bool, int]:
    """numkeys (at `at`), the keys, MIN|MAX and COUNT, checked in zmpopGenericCommand's order."""
    numkeys = parse_int(argv[at])
    if numkeys is None or numkeys < 1:
        raise errors.NUMKEYS_NOT_POSITIVE()
    where = at + numkeys + 1
    if where >= len(argv):
        raise errors.SYNTAX()
    side = argv[where].lower()
    if side not in (b"min", b"max"):
        raise errors.SYNTAX()
    count = None
    j = where + 1
    while j < len(argv):
        if count is None and argv[j].lower() == b"count" and j + 1 < len(argv):
            count = parse_int(argv[j + 1])
            if count is None or count < 1:
                raise errors.COUNT_NOT_POSITIVE()
            j += 2
        else:
            raise errors.SYNTAX()
    return argv[at + 1 : where], side == b"max", 1 if count is None else count


def zmpop(session: Session, argv: list[bytes]) -> Plan | Reply:
    """ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] -> [key, [[member, score], ...]]."""
    keys, highest, count = _mpop_args(argv, 1)
    found = _first_full(session, keys)
    if found is None:
        return NULL_ARRAY
    return _pop_from(*found, highest, count, True, session)


def _blocking(session: Session, keys: list[bytes], timeout: int, highest: bool, count: int,
              nested: bool) -> Plan | Block:
    found = _first_full(session, keys)
    if found is None:
        return Block(tuple(dict.fromkeys(keys)), timeout, NULL_ARRAY)
    return _pop_from(*found, highest, count, nested, session)


def bzmpop(session: Session, argv: list[bytes]) -> Plan | Block:
    """BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP that waits."""
    keys, highest, count = _mpop_args(argv, 2)
    return _blocking(session, keys, timeout_ms(argv[1]), highest, count, True)


def bzpopmin(session: Session, argv: list[bytes]) -> Plan | Block:
    """BZPOPMIN key [key ...] timeout -> [key, member, score], or the null array."""
    return _blocking(session, argv[1:-1], timeout_ms(argv[-1]), False, 1, False)


def bzpopmax(session: Session, argv: list[bytes]) -> Plan | Block:
    """BZPOPMAX key [key ...] timeout -> [key, member, score], or the null array."""
    return _blocking(session, argv[1:-1], timeout_ms(argv[-1]), True, 1, False)


_GROUP: Final = "sorted-set"
COMMANDS: Final = [
    command("zmpop", -4, "write movablekeys", zmpop, group=_GROUP,
            summary="Returns the highest- or lowest-scoring members from one or more sorted "
                    "sets after removing them. Deletes the sorted set if the last member was "
                    "popped."),
    command("bzmpop", -5, "write blocking movablekeys", bzmpop, group=_GROUP,
            summary="Removes and returns a member by score from one or more sorted sets. "
                    "Blocks until a member is available otherwise. Deletes the sorted set if "
                    "the last element was popped."),
    command("bzpopmin", -3, "write noscript blocking fast", bzpopmin, (1, -2, 1), group=_GROUP,
            summary="Removes and returns the member with the lowest score from one or more "
                    "sorted sets. Blocks until a member available otherwise.  Deletes the "
                    "sorted set if the last element was popped."),
    command("bzpopmax", -3, "write noscript blocking fast", bzpopmax, (1, -2, 1), group=_GROUP,
            summary="Removes and returns the member with the highest score from one or more "
                    "sorted sets. Blocks until a member available otherwise.  Deletes the "
                    "sorted set if the last element was popped."),
]
