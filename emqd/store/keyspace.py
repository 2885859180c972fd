"""The keyspace: key -> hash or sorted set, and `apply(ops)`.

This is the one place that knows keys and types: it raises WRONGTYPE, creates
a key on its first write and deletes a key that became empty, so no command
repeats those rules. Reads go through `hash()` / `zset()`; writes only through
`apply()`, which runs a plan's ops in one synchronous pass.

`apply` trusts its ops: a command validates everything (types, integers,
scores) before it returns a plan, so applying can never fail halfway. The ops
are real Redis commands in their plain forms (HSET, HDEL, HINCRBY, DEL, ZADD
without flags, ZREM, FLUSHALL), which is also what the append-only file logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from emqd.errors import WRONGTYPE
from emqd.plan import Op
from emqd.store.zset import ZSet

Value = dict | ZSet


class Keyspace:
    """Every key's value, plus the set of watched keys written since last asked."""

    __slots__ = ("data", "watched", "ready")

    def __init__(self) -> None:
        self.data: dict[bytes, Value] = {}
        # Keys that parked clients wait on (key -> count of waiters), and the
        # ones among them that a write touched since `take_ready()`.
        self.watched: dict[bytes, int] = {}
        self.ready: set[bytes] = set()

    # --- reads ---------------------------------------------------------------
    def hash(self, key: bytes) -> dict | None:
        """The hash at `key`, None when absent; WRONGTYPE when it is a sorted set."""
        value = self.data.get(key)
        if value is None or type(value) is dict:
            return value
        raise WRONGTYPE()

    def zset(self, key: bytes) -> ZSet | None:
        """The sorted set at `key`, None when absent; WRONGTYPE when it is a hash."""
        value = self.data.get(key)
        if value is None or type(value) is ZSet:
            return value
        raise WRONGTYPE()

    def type_name(self, key: bytes) -> str:
        value = self.data.get(key)
        if value is None:
            return "none"
        return "hash" if type(value) is dict else "zset"

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: bytes) -> bool:
        return key in self.data

    # --- writes --------------------------------------------------------------
    def apply(self, ops: Iterable[Op]) -> None:
        """Run `ops` in order. Never raises for a plan built by a command."""
        data = self.data
        watched = self.watched
        for op in ops:
            _APPLY[op[0]](data, op)
            if watched and len(op) > 1 and op[1] in watched:
                self.ready.add(op[1])

    def take_ready(self) -> set[bytes]:
        """Watched keys written since the last call."""
        ready, self.ready = self.ready, set()
        return ready


def _hset(data: dict, op: Op) -> None:
    key = op[1]
    row = data.get(key)
    if row is None:
        row = data[key] = {}
    for i in range(2, len(op), 2):
        row[op[i]] = op[i + 1]


def _hdel(data: dict, op: Op) -> None:
    key = op[1]
    row = data.get(key)
    if row is None:
        return
    for name in op[2:]:
        row.pop(name, None)
    if not row:
        del data[key]


def _hincrby(data: dict, op: Op) -> None:
    _, key, name, by = op
    row = data.get(key)
    if row is None:
        row = data[key] = {}
    current = row.get(name)
    row[name] = b"%d" % ((int(current) if current is not None else 0) + int(by))


def _del(data: dict, op: Op) -> None:
    for key in op[1:]:
        data.pop(key, None)


def _zadd(data: dict, op: Op) -> None:
    key = op[1]
    zset = data.get(key)
    if zset is None:
        zset = data[key] = ZSet()
    for i in range(2, len(op), 2):
        zset.add(op[i + 1], float(op[i]))


def _zrem(data: dict, op: Op) -> None:
    key = op[1]
    zset = data.get(key)
    if zset is None:
        return
    for member in op[2:]:
        zset.remove(member)
    if not zset:
        del data[key]


def _flushall(data: dict, op: Op) -> None:
    data.clear()


_APPLY: dict[bytes, Callable[[dict, Op], None]] = {
    b"HSET": _hset,
    b"HDEL": _hdel,
    b"HINCRBY": _hincrby,
    b"DEL": _del,
    b"ZADD": _zadd,
    b"ZREM": _zrem,
    b"FLUSHALL": _flushall,
}
