"""Hash commands (protocol section 7), answering as Redis 7.0 does, byte for byte.

HSET HSETNX HMSET HGET HMGET HGETALL HDEL HEXISTS HLEN HKEYS HVALS HINCRBY
HINCRBYFLOAT HSTRLEN HSCAN (HRANDFIELD is in random_members.py). Reads answer
from the store; writes return a `Plan` whose ops are plain HSET / HDEL with
every value resolved (HINCRBY and HINCRBYFLOAT log the HSET of their result),
after every check has passed, so a refused command writes nothing.
Arguments are checked in Redis's order, because with several faults the first
one found is the error a client sees (HINCRBY reads its increment before the
key's type).
"""

from __future__ import annotations

from emqd import errors
from emqd.command import command
from emqd.commit.plan import Plan, removal
from emqd.compat import longdouble, scan
from emqd.compat.numbers import parse_int
from emqd.core import Session
from emqd.reply import PAIRS, STREAM_MIN, Reply, Stream, array
from emqd.store import hash as hashes
from emqd.store.hash import BigHash, Hash, incremented


def _row(session: Session, key: bytes) -> Hash | None:
    return session.core.keyspace.hash(key)


def _check_pairs(argv: list[bytes], name: str) -> None:
    if len(argv) % 2:
        raise errors.wrong_arity(name)


def hset(session: Session, argv: list[bytes]) -> Plan:
    """HSET key field value [field value ...] -> the number of fields created."""
    _check_pairs(argv, "hset")
    row = _row(session, argv[1])
    fields = {argv[i] for i in range(2, len(argv), 2)}
    created = len(fields) if row is None else sum(not hashes.has(row, f) for f in fields)
    return Plan([(b"HSET", *argv[1:])], created)


def hmset(session: Session, argv: list[bytes]) -> Plan:
    """HMSET key field value [field value ...] -> OK."""
    _check_pairs(argv, "hmset")
    _row(session, argv[1])  # WRONGTYPE before anything is written
    return Plan([(b"HSET", *argv[1:])], "OK")


def hsetnx(session: Session, argv: list[bytes]) -> Plan | int:
    """HSETNX key field value -> 1 when set, 0 when the field existed."""
    row = _row(session, argv[1])
    if row is not None and hashes.has(row, argv[2]):
        return 0
    return Plan([(b"HSET", argv[1], argv[2], argv[3])], 1)


def hget(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return None if row is None else hashes.get(row, argv[2])


def hmget(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return [None if row is None else hashes.get(row, name) for name in argv[2:]]


def hgetall(session: Session, argv: list[bytes]) -> Reply:
    """A map under RESP3, a flat field/value array under RESP2; a big hash's as a Stream
    of a snapshot of its names and values (two lists of references, made in C)."""
    row = _row(session, argv[1])
    if isinstance(row, BigHash) and len(row) >= STREAM_MIN:
        return Stream((list(row), list(row.values())), len(row), PAIRS)
    return hashes.as_dict(row)


def hkeys(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return [] if row is None else array(list(hashes.names(row)))


def hvals(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return [] if row is None else array(list(hashes.values(row)))


def hdel(session: Session, argv: list[bytes]) -> Plan | int:
    """HDEL key field [field ...] -> the number removed; the key goes with its last field."""
    row = _row(session, argv[1])
    if row is None:
        return 0
    return removal((b"HDEL", argv[1]), hashes.field_set(row), argv[2:])


def hexists(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return int(row is not None and hashes.has(row, argv[2]))


def hlen(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return 0 if row is None else hashes.length(row)


def hstrlen(session: Session, argv: list[bytes]) -> Reply:
    row = _row(session, argv[1])
    return len((None if row is None else hashes.get(row, argv[2])) or b"")


def hincrby(session: Session, argv: list[bytes]) -> Plan:
    """HINCRBY key field increment -> the new value, logged as the HSET of that value."""
    by = parse_int(argv[3])
    if by is None:
        raise errors.NOT_INTEGER()
    row = _row(session, argv[1])
    value = incremented(None if row is None else hashes.get(row, argv[2]), by)
    return Plan([(b"HSET", argv[1], argv[2], b"%d" % value)], value)


def hincrbyfloat(session: Session, argv: list[bytes]) -> Plan:
    """HINCRBYFLOAT key field increment -> the new value's text, logged as its HSET.

    Redis adds in long double and writes `%.17Lf` trimmed (emqd/compat/longdouble.py):
    `0.1` stays `0.1`. Errors, in Redis's order: an increment that is no float,
    or is infinite; WRONGTYPE; a stored value that is no float; a sum that is.
    """
    by = longdouble.parse(argv[3])
    if by is None:
        raise errors.NOT_FLOAT()
    if isinstance(by, float):
        raise errors.INCR_NAN_OR_INF()
    row = _row(session, argv[1])
    current = None if row is None else hashes.get(row, argv[2])
    value = longdouble.ZERO if current is None else longdouble.parse(current)
    if value is None:
        raise errors.HASH_NOT_FLOAT()
    total = longdouble.add(value, by)
    if isinstance(total, float):
        raise errors.INCR_WOULD_BE_NAN_OR_INF()
    text = longdouble.format_human(total)
    return Plan([(b"HSET", argv[1], argv[2], text)], text)


def hscan(session: Session, argv: list[bytes]) -> Reply:
    """HSCAN key cursor [MATCH pattern] [COUNT count] -> [cursor, [field, value, ...]].

    A hash Redis would hold as a listpack (or one of at most scan.SMALL fields)
    comes whole, in order, with cursor 0 (whatever cursor was given); a bigger
    one is paged through its index (`scan.page`).
    """
    cursor = scan.cursor_arg(argv[2])
    row = _row(session, argv[1])
    if row is None:
        return [b"0", []]
    count, pattern = scan.parse_options(argv, 3)
    paged = None
    if isinstance(row, BigHash) and not row.listpack:  # a Row has at most 32 fields
        paged = scan.page(row, row, cursor, count)
    cursor, names = (0, list(hashes.names(row))) if paged is None else paged
    items: list[bytes | None] = []
    for name in names:
        if pattern is None or pattern(name):
            items += (name, hashes.get(row, name))
    return [b"%d" % cursor, items]


COMMANDS = [
    command("hset", -4, "write denyoom fast", hset, (1, 1, 1), group="hash"),
    command("hsetnx", 4, "write denyoom fast", hsetnx, (1, 1, 1), group="hash"),
    command("hmset", -4, "write denyoom fast", hmset, (1, 1, 1), group="hash"),
    command("hget", 3, "readonly fast", hget, (1, 1, 1), group="hash"),
    command("hmget", -3, "readonly fast", hmget, (1, 1, 1), group="hash"),
    command("hgetall", 2, "readonly", hgetall, (1, 1, 1), group="hash"),
    command("hdel", -3, "write fast", hdel, (1, 1, 1), group="hash"),
    command("hexists", 3, "readonly fast", hexists, (1, 1, 1), group="hash"),
    command("hlen", 2, "readonly fast", hlen, (1, 1, 1), group="hash"),
    command("hkeys", 2, "readonly", hkeys, (1, 1, 1), group="hash"),
    command("hvals", 2, "readonly", hvals, (1, 1, 1), group="hash"),
    command("hincrby", 4, "write denyoom fast", hincrby, (1, 1, 1), group="hash"),
    command("hincrbyfloat", 4, "write denyoom fast", hincrbyfloat, (1, 1, 1), group="hash",
            summary="Increments the floating point value of a field by a number. Uses 0 as "
                    "initial value if the field doesn't exist."),
    command("hstrlen", 3, "readonly fast", hstrlen, (1, 1, 1), group="hash"),
    command("hscan", -3, "readonly", hscan, (1, 1, 1), group="hash"),
]
