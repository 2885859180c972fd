"""The keyspace: key -> hash or sorted set, and `apply(ops)`.

This is the one place that knows keys and types: it raises WRONGTYPE, creates
a key on its first write and deletes a key that became empty, so no command
repeats those rules. Reads go through `hash()` / `zset()` (the `View` that
planners see); writes only through `apply()`, which runs a plan's ops in one
synchronous pass.

`apply` trusts its ops: a command validates everything (types, integers,
scores) before it returns a plan, so applying can never fail halfway. The ops
are real Redis commands in their plain forms (HSET, HDEL, HINCRBY, DEL, ZADD
without flags, ZREM, FLUSHALL), which is also what the append-only file logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from emqd import errors
from emqd.store import hash as hashes
from emqd.store.hash import Hash, Limits
from emqd.store.zset import ZSet

Value = Hash | ZSet


class View(Protocol):
    """What a planner may do with the store: read. (The Keyspace is one; tests fake it.)"""

    def hash(self, key: bytes) -> Hash | None: ...

    def zset(self, key: bytes) -> ZSet | None: ...

    def type_name(self, key: bytes) -> str: ...


class Keyspace:
    """Every key's value, plus the set of watched keys written since last asked."""

    __slots__ = ("data", "watched", "ready", "limits")

    def __init__(self) -> None:
        self.data: dict[bytes, Value] = {}
        # Keys that parked clients wait on (key -> count of waiters), and the
        # ones among them that a write touched since `take_ready()`.
        self.watched: dict[bytes, int] = {}
        self.ready: set[bytes] = set()
        self.limits = Limits()  # Redis's listpack thresholds (CONFIG SET)

    # --- reads ---------------------------------------------------------------
    def hash(self, key: bytes) -> Hash | None:
        """The hash at `key`, None when absent; WRONGTYPE when it is a sorted set."""
        value = self.data.get(key)
        if value is None or type(value) is not ZSet:
            return value  # type: ignore[return-value]
        raise errors.WRONGTYPE()

    def zset(self, key: bytes) -> ZSet | None:
        """The sorted set at `key`, None when absent; WRONGTYPE when it is a hash."""
        value = self.data.get(key)
        if value is None or type(value) is ZSet:
            return value
        raise errors.WRONGTYPE()

    def type_name(self, key: bytes) -> str:
        value = self.data.get(key)
        if value is None:
            return "none"
        return "zset" if type(value) is ZSet else "hash"

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: bytes) -> bool:
        return key in self.data

    # --- writes --------------------------------------------------------------
    def apply(self, ops: Iterable[Sequence[Any]]) -> None:
        """Run `ops` in order. Never raises for a plan built by a command."""
        watched = self.watched
        for op in ops:
            _APPLY[op[0]](self, op)
            if watched and len(op) > 1 and op[1] in watched:
                self.ready.add(op[1])

    def take_ready(self) -> set[bytes]:
        """Watched keys written since the last call."""
        ready, self.ready = self.ready, set()
        return ready


def _hset(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    key = op[1]
    # tuple() of a tuple is the tuple itself; the loader's ops are lists
    data[key] = hashes.written(data.get(key), tuple(op[2::2]), tuple(op[3::2]), space.limits)  # type: ignore[arg-type]


def _hdel(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    key = op[1]
    row = data.get(key)
    if row is None:
        return
    left = hashes.removed(row, op[2:])  # type: ignore[arg-type]
    if left is None:
        del data[key]
    else:
        data[key] = left


def _hincrby(space: Keyspace, op: Sequence[Any]) -> None:
    _, key, name, by = op
    row = space.data.get(key)
    current = None if row is None else hashes.get(row, name)  # type: ignore[arg-type]
    value = b"%d" % ((int(current) if current is not None else 0) + int(by))
    space.data[key] = hashes.written(row, (name,), (value,), space.limits)  # type: ignore[arg-type]


def _del(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    for key in op[1:]:
        data.pop(key, None)


def _zadd(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    key = op[1]
    zset = data.get(key)
    limits = space.limits
    if zset is None:
        zset = data[key] = ZSet()
        # Redis picks a new set's encoding from the whole ZADD (its size and
        # longest member) before adding: a set born too big for a listpack
        # keeps -0 scores from its first member on.
        members = op[3::2]
        if len(members) > limits.zset_entries or max(map(len, members)) > limits.zset_value:
            zset.listpack = False
    for i in range(2, len(op), 2):
        zset.add(op[i + 1], float(op[i]), limits)  # type: ignore[union-attr]


def _zrem(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    key = op[1]
    zset = data.get(key)
    if zset is None:
        return
    for member in op[2:]:
        zset.remove(member)  # type: ignore[union-attr]
    if not zset:
        del data[key]


def _flushall(space: Keyspace, op: Sequence[Any]) -> None:
    space.data.clear()


_APPLY: dict[bytes, Callable[[Keyspace, Sequence[Any]], None]] = {
    b"HSET": _hset,
    b"HDEL": _hdel,
    b"HINCRBY": _hincrby,
    b"DEL": _del,
    b"ZADD": _zadd,
    b"ZREM": _zrem,
    b"FLUSHALL": _flushall,
}

