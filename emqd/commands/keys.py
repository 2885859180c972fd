"""Key commands: DEL, UNLINK, EXISTS, TOUCH, RANDOMKEY, TYPE, KEYS, SCAN, DBSIZE, FLUSHDB,
FLUSHALL, OBJECT (TTL and the EXPIRE family: expiry.py).

Writes return plans of the plain ops the keyspace applies: DEL (UNLINK is
logged as DEL) and FLUSHALL (emqd has one database, so FLUSHDB is FLUSHALL).

SCAN pages the keyspace as HSCAN pages a big hash (emqd/compat/scan.py): its cursor is
a position in the keyspace's ScanIndex, built by a scan's first calls, so a
call costs O(COUNT) however many keys there are, and a key present from the
first call to the last is returned exactly once, whatever is written in
between. A keyspace of at most scan.SMALL keys is answered whole. See
docs/SERVER.md.
"""

from __future__ import annotations

import random
from itertools import islice

from emqd import errors
from emqd.command import command, container
from emqd.commands import helps
from emqd.commit.plan import Plan, removal
from emqd.compat.glob import compile_pattern
from emqd.compat.scan import cursor_arg, page, parse_options
from emqd.core import Session
from emqd.reply import Reply, array
from emqd.store import hash as hashes
from emqd.store.zset import ZSet


def del_(session: Session, argv: list[bytes]) -> Plan:
    data = session.core.keyspace.data
    return removal((b"DEL",), data, argv[1:])


def exists(session: Session, argv: list[bytes]) -> Reply:
    data = session.core.keyspace.data
    return sum(1 for key in argv[1:] if key in data)


def touch(session: Session, argv: list[bytes]) -> Reply:
    """TOUCH key [key ...] -> how many of the keys exist (each time it is named), as EXISTS:
    emqd keeps no access times to update (see OBJECT IDLETIME)."""
    return exists(session, argv)


def randomkey(session: Session, argv: list[bytes]) -> Reply:
    """RANDOMKEY -> a key chosen at random, nil when there is none. O(n) in the keys: a
    dict has no random access, and a walk in C costs ~10 ms a million keys."""
    data = session.core.keyspace.data
    if not data:
        return None
    return next(islice(iter(data), random.randrange(len(data)), None))


def type_(session: Session, argv: list[bytes]) -> Reply:
    return session.core.keyspace.type_name(argv[1])


def keys(session: Session, argv: list[bytes]) -> Reply:
    """KEYS pattern: O(n) as in Redis, with a small constant: `*` lists the keys in C,
    another pattern is one `filter` pass; a big answer is a Stream of that list."""
    data = session.core.keyspace.data
    if argv[1] == b"*":
        return array(list(data))
    return array(list(filter(compile_pattern(argv[1]), data)))


def scan(session: Session, argv: list[bytes]) -> Reply:
    """SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]"""
    cursor = cursor_arg(argv[1])
    type_name, rest = None, argv[:2]
    for i in range(2, len(argv), 2):  # TYPE is SCAN's own; MATCH and COUNT as HSCAN reads them
        if argv[i].lower() == b"type" and i + 1 < len(argv):
            type_name = argv[i + 1].decode("latin-1")
        else:
            rest += argv[i : i + 2]
    count, matches = parse_options(rest, 2)
    keyspace = session.core.keyspace
    data = keyspace.data
    paged = page(keyspace, data, cursor, count)
    cursor, found = (0, list(data)) if paged is None else paged
    if matches is not None:
        found = [key for key in found if matches(key)]
    if type_name is not None:
        found = [key for key in found if keyspace.type_name(key) == type_name]
    return [b"%d" % cursor, found]


def dbsize(session: Session, argv: list[bytes]) -> Reply:
    return len(session.core.keyspace)


def flush(session: Session, argv: list[bytes]) -> Plan:
    """FLUSHALL / FLUSHDB [ASYNC|SYNC]: both empty the one database."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in (b"sync", b"async")):
        raise errors.SYNTAX()
    return Plan([(b"FLUSHALL",)], "OK")


# --- OBJECT: what Redis 7.0 with its default maxmemory-policy answers ---------------
def _value(session: Session, key: bytes) -> bytes | hashes.BigHash | ZSet | None:
    return session.core.keyspace.data.get(key)


def object_encoding(session: Session, argv: list[bytes]) -> Reply:
    """The encoding Redis would hold the value in (emqd tracks it: store/hash.py, zset.py);
    a listpack outgrown stays `hashtable` / `skiplist`, as in Redis. Nil for no key."""
    value = _value(session, argv[2])
    if value is None:
        return None
    if type(value) is bytes and not hashes.is_row(value):  # a listpack set (store/listpack.py)
        return b"listpack"
    if isinstance(value, ZSet):
        return b"listpack" if value.listpack else b"skiplist"
    return b"listpack" if hashes.is_listpack(value) else b"hashtable"


def object_freq(session: Session, argv: list[bytes]) -> Reply:
    """Redis's refusal when no LFU policy is selected (emqd evicts nothing)."""
    if _value(session, argv[2]) is None:
        return None
    raise errors.FREQ_NOT_TRACKED()


def object_idletime(session: Session, argv: list[bytes]) -> Reply:
    """Refused: Redis keeps an access time per key for its LRU eviction; emqd evicts
    nothing and keeps none (one per job row would cost every read a write)."""
    if _value(session, argv[2]) is None:
        return None
    raise errors.IDLETIME_NOT_TRACKED()


def object_refcount(session: Session, argv: list[bytes]) -> Reply:
    """1, as Redis answers for a hash or a sorted set (only the keyspace refers to it)."""
    return None if _value(session, argv[2]) is None else 1


def object_help(session: Session, argv: list[bytes]) -> Reply:
    return helps.help_reply("OBJECT", helps.OBJECT)


_KEYS = "generic"
COMMANDS = [
    command("del", -2, "write", del_, (1, -1, 1), group=_KEYS, summary="Deletes one or more keys."),
    command("unlink", -2, "write fast", del_, (1, -1, 1), group=_KEYS,
            summary="Asynchronously deletes one or more keys."),
    command("exists", -2, "readonly fast", exists, (1, -1, 1), group=_KEYS,
            summary="Determines whether one or more keys exist."),
    command("touch", -2, "readonly fast", touch, (1, -1, 1), group=_KEYS,
            summary="Returns the number of existing keys out of those specified after updating "
                    "the time they were last accessed."),
    command("randomkey", 1, "readonly", randomkey, group=_KEYS,
            summary="Returns a random key name from the database."),
    command("type", 2, "readonly fast", type_, (1, 1, 1), group=_KEYS,
            summary="Determines the type of value stored at a key."),
    command("keys", 2, "readonly", keys, group=_KEYS,
            summary="Returns all key names that match a pattern."),
    command("scan", -2, "readonly", scan, group=_KEYS,
            summary="Iterates over the key names in the database."),
    command("dbsize", 1, "readonly fast", dbsize, group="server",
            summary="Returns the number of keys in the database."),
    command("flushdb", -1, "write", flush, group="server",
            summary="Removes all keys from the current database."),
    command("flushall", -1, "write", flush, group="server",
            summary="Removes all keys from all databases."),
    container("object", "", _KEYS,
              "A container for object introspection commands."),
]

SUBCOMMANDS = {
    "object": [
        command("object|encoding", 3, "readonly", object_encoding, (2, 2, 1), group=_KEYS,
                summary="Returns the internal encoding of a Redis object."),
        command("object|freq", 3, "readonly", object_freq, (2, 2, 1), group=_KEYS,
                summary="Returns the logarithmic access frequency counter of a Redis object."),
        command("object|idletime", 3, "readonly", object_idletime, (2, 2, 1), group=_KEYS,
                summary="Returns the time since the last access to a Redis object."),
        command("object|refcount", 3, "readonly", object_refcount, (2, 2, 1), group=_KEYS,
                summary="Returns the reference count of a value of a key."),
        command("object|help", 2, "loading stale", object_help, group=_KEYS,
                summary="Returns helpful text about the different subcommands."),
    ],
}
