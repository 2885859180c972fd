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
from typing import Any, Final, TypeGuard, cast

from mypy_extensions import mypyc_attr

from emqd import errors
from emqd.compat.numbers import MAX_TIME_MS, parse_int
from emqd.store import hash as hashes
from emqd.store import listpack as lp
from emqd.store import sizes
from emqd.store.hash import BigHash, Hash, Limits
from emqd.store.scan_index import ScanIndex
from emqd.store.zset import ZSet, added_to, skiplist

# A hash (a Row, which is bytes, or a BigHash), a skiplist ZSet, or a listpack sorted
# set's bytes (store/listpack.py: stored as the value itself, read through a ZSet made
# for the read). Of the two kinds of bytes, a Row starts with 0x00 (`hashes.is_row`).
Value = Hash | ZSet | bytes


@mypyc_attr(allow_interpreted_subclasses=True)
class View:
    """What a planner may do with the store: read. The Keyspace is one; tests make
    others by subclassing it in Python (tests/verbs/planner.py's KeysRead).

    A class rather than a Protocol: compiled planners call a class's methods
    natively, where a Protocol's were generic method calls (~40 ns each, about
    fourteen a job cycle)."""

    __slots__ = ()

    def hash(self, key: bytes) -> Hash | None:
        raise NotImplementedError

    def zset(self, key: bytes) -> ZSet | None:
        raise NotImplementedError

    def check_zset(self, key: bytes) -> None:
        """WRONGTYPE unless `key` holds a sorted set or nothing: a planner's check of a key
        it will write, with nothing to read there."""
        self.zset(key)

    def type_name(self, key: bytes) -> str:
        raise NotImplementedError

    def zcard(self, key: bytes) -> int:
        """The size of the sorted set at `key` (0 when absent); WRONGTYPE on a hash."""
        zset = self.zset(key)
        return 0 if zset is None else len(zset)

    def hget(self, key: bytes, name: bytes) -> bytes | None:
        """One field of the hash at `key`; WRONGTYPE on a sorted set."""
        row = self.hash(key)
        return None if row is None else hashes.get(row, name)


class Keyspace(View):
    """Every key's value, plus the set of watched keys written since last asked."""

    __slots__ = ("data", "watched", "ready", "limits", "scan", "dropped", "parts", "on_garbage",
                 "used")

    def __init__(self) -> None:
        self.data: dict[bytes, Value] = {}
        # Keys that parked clients wait on (key -> count of waiters), and the
        # ones among them that a write touched since `take_ready()`.
        self.watched: dict[bytes, int] = {}
        self.ready: set[bytes] = set()
        self.limits = Limits()  # Redis's listpack thresholds (CONFIG SET)
        # The index of a SCAN in progress (store/scan_index.py): while there is
        # one, every key created or deleted below is noted in it.
        self.scan: ScanIndex | None = None
        # What FLUSHALL and the DEL of a big value let go of, as lists of references
        # freed a slice at a time by `free`: values (big ones among them are listed
        # in turn) and keys, fields, members; and the server's hook that schedules
        # those calls (emqd/serve/lifecycle.py). Without one everything goes at once.
        self.dropped: list[list[Value]] = []
        self.parts: list[list[Any]] = []
        self.on_garbage: Callable[[], None] | None = None
        # The bytes the keys and values cost as held (store/sizes.py), kept by every
        # write below: MEMORY USAGE's figures summed, INFO's dataset, maxmemory's measure.
        self.used = 0

    # --- reads ---------------------------------------------------------------
    def hash(self, key: bytes) -> Hash | None:
        """The hash at `key`, None when absent; WRONGTYPE when it is a sorted set."""
        value = self.data.get(key)
        if value is None:
            return None
        if type(value) is bytes:
            if hashes.is_row(value):
                return value
            raise errors.WRONGTYPE()
        if type(value) is ZSet:
            raise errors.WRONGTYPE()
        return value

    def zset(self, key: bytes) -> ZSet | None:
        """The sorted set at `key`, None when absent; WRONGTYPE when it is a hash. A listpack
        is handed out in a ZSet of its own: a snapshot, which later writes do not change."""
        value = self.data.get(key)
        if value is None:
            return None
        if type(value) is bytes:
            if hashes.is_row(value):
                raise errors.WRONGTYPE()
            return ZSet(value)
        if type(value) is ZSet:
            return value
        raise errors.WRONGTYPE()

    def check_zset(self, key: bytes) -> None:
        """As View's, without making a listpack's ZSet."""
        value = self.data.get(key)
        if value is not None and not is_zset(value):
            raise errors.WRONGTYPE()

    def type_name(self, key: bytes) -> str:
        value = self.data.get(key)
        if value is None:
            return "none"
        return "zset" if is_zset(value) else "hash"

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: bytes) -> bool:
        return key in self.data

    def with_prefix(self, prefix: bytes) -> list[tuple[bytes, Value]]:
        """Every key that starts with `prefix`, with its value (cluster mode: one queue's
        keys, `emq:{QUEUE}:`, to let go or to write back)."""
        return [(key, value) for key, value in self.data.items() if key.startswith(prefix)]

    # --- writes --------------------------------------------------------------
    def apply(self, ops: Iterable[Sequence[Any]]) -> None:
        """Run `ops` in order. Never raises for a plan built by a command."""
        watched = self.watched
        for op in ops:
            _apply_op(self, op)
            if watched:
                self._note_written(op)

    def _note_written(self, op: Sequence[Any]) -> None:
        """Note the watched keys an op wrote: its key, every key of a DEL, all for FLUSHALL
        (a parked EMQ.WAIT learns that its job's row went, whichever way it went)."""
        name = op[0]
        if name == b"DEL":
            keys: Iterable[bytes] = op[1:]
        elif name == b"FLUSHALL":
            keys = list(self.watched)
        else:
            keys = op[1:2]
        for key in keys:
            if key in self.watched:
                self.ready.add(key)

    def touched(self, keys: tuple[bytes, ...]) -> None:
        """Note the watched ones among keys a plan wrote (a Shape's applier)."""
        watched = self.watched
        for key in keys:
            if key in watched:
                self.ready.add(key)

    def take_ready(self) -> set[bytes]:
        """Watched keys written since the last call."""
        ready, self.ready = self.ready, set()
        return ready

    # --- freeing what FLUSHALL or a DEL let go of, a slice at a time -----------------
    def discard(self, values: dict[bytes, Value]) -> None:
        """Let go of `values` (key -> value) without freeing them now: a million keys cost
        their deallocation at once, a quarter of a second. Their keys and values are
        listed (in C, references only) so that the dict goes at once and cheaply, and
        `free` deletes slices of those lists. Without the server's hook (loading the
        log, tests) they are freed at once."""
        if self.on_garbage is not None:
            self.parts.append(list(values))
            self.dropped.append(list(values.values()))
            self.on_garbage()

    def free(self, budget: int) -> bool:
        """Free about `budget` objects of what was discarded; True while some is left.

        A big value among them is listed the same way before it goes, so that its
        fields or members are freed in later slices. Nothing is ever changed, only
        let go of: a value someone else still holds (a compaction's snapshot,
        persist/rewrite.py) stays whole, and its lists free nothing.
        """
        parts, dropped = self.parts, self.dropped
        while budget > 0:
            if parts:
                part = parts[-1]
                cut = max(0, len(part) - budget)
                budget -= len(part) - cut
                del part[cut:]
                if not part:
                    parts.pop()
                continue
            if not dropped:
                return False
            values = dropped[-1]
            cut = max(0, len(values) - budget)
            budget -= len(values) - cut
            for value in values[cut:]:
                if _is_big(value):
                    _list_parts(value, parts)
            del values[cut:]
            if not values:
                dropped.pop()
        return bool(parts or dropped)


def is_zset(value: Value) -> bool:
    """A stored value is a sorted set (either form), not a hash."""
    if type(value) is bytes:
        return not hashes.is_row(value)
    return type(value) is ZSet


def _hash_of(value: Value) -> Hash:
    """A stored value that must be a hash; WRONGTYPE when it is a sorted set (a plan never
    writes a hash's field into a set; a damaged log might)."""
    if is_zset(value):
        raise errors.WRONGTYPE()
    return cast(Hash, value)  # not a sorted set: a Row or a BigHash


def _zset_of(value: Value) -> ZSet | bytes:
    """A stored value that must be a sorted set (a ZSet, or a listpack's bytes); WRONGTYPE
    when it is a hash."""
    if not is_zset(value):
        raise errors.WRONGTYPE()
    return cast("ZSet | bytes", value)  # a ZSet, or bytes that are no Row


# --- the primitives each op is made of (and what a Shape's applier calls directly) -----
# Each keeps `Keyspace.used`, the bytes the keyspace holds (store/sizes.py): a value's
# cost before the write, against its cost after, a key's own when it comes or goes.
def value_bytes(value: Value) -> int:
    """What a stored value costs, without its key (store/sizes.py): a row or a listpack
    from its size, a skiplist or a BigHash as it keeps its own."""
    if type(value) is bytes:
        return sizes.of_bytes(len(value))
    if type(value) is ZSet:
        return value.size()
    return cast(BigHash, value).nbytes  # neither bytes nor a ZSet


def key_bytes(space: Keyspace, key: bytes) -> int | None:
    """MEMORY USAGE: the key and its value, None when there is no such key."""
    value = space.data.get(key)
    return None if value is None else sizes.key(key) + value_bytes(value)


def set_fields(space: Keyspace, key: bytes, names: tuple[bytes, ...],
               values: tuple[bytes, ...]) -> None:
    """HSET key names[0] values[0] ..."""
    data = space.data
    row = data.get(key)
    before = 0
    if row is None:
        before = -sizes.key(key)
        if space.scan is not None:
            space.scan = space.scan.added(key)
    else:
        row = _hash_of(row)
        before = value_bytes(row)  # counted first: a BigHash is written in place
    new = hashes.written(row, names, values, space.limits)
    data[key] = new
    space.used += value_bytes(new) - before


def add_member(space: Keyspace, key: bytes, score: Any, member: bytes) -> None:
    """ZADD key score member: one member (a score as the plan wrote it: int, float, bytes)."""
    data = space.data
    zset = data.get(key)
    if zset is None:
        zset = _new_zset(space, key, member)
        before = 0
    else:
        zset = _zset_of(zset)  # a plan never asks for a hash; a damaged log might
        before = value_bytes(zset)
    if type(zset) is ZSet:
        zset.add(member, _score(score), space.limits)
        data[key] = zset
    else:
        zset = data[key] = added_to(zset, member, _score(score), space.limits)
    space.used += value_bytes(zset) - before


class _ScoreText:
    """The last score a plan wrote as text, and its value."""

    __slots__ = ("text", "score")

    def __init__(self) -> None:
        self.text = b""
        self.score = 0.0


_SCORE_TEXT: Final = _ScoreText()


def _score(score: Any) -> float:
    """A plan's score as a float; an int (a plan's times) converted natively, where a
    `float()` of an untyped value is a generic call (~40 ns a ZADD).

    A time a plan wrote as text (a CLAIM's lease deadline, a FAIL's due time) is read
    as digits natively, where `float()` of bytes cost ~700 instructions a ZADD, and
    remembered: the fifty leases of one CLAIM share their deadline. Below 2**53 an
    integer is exact as a double (MAX_TIME_MS), so the float is the one `float()` reads.
    """
    if isinstance(score, int):
        return float(score)
    if isinstance(score, float):
        return score
    if isinstance(score, bytes):
        last = _SCORE_TEXT
        if score == last.text:
            return last.score
        whole = parse_int(score)
        if whole is not None and -MAX_TIME_MS < whole < MAX_TIME_MS:
            last.text, last.score = score, float(whole)
            return last.score
    return float(score)


def remove_member(space: Keyspace, key: bytes, member: bytes) -> None:
    """ZREM key member; the key goes with its last member."""
    _remove_members(space, key, (member,))


def remove_field(space: Keyspace, key: bytes, name: bytes) -> None:
    """HDEL key name: one field."""
    _remove_fields(space, key, (name,))


def _remove_fields(space: Keyspace, key: bytes, names: Sequence[bytes]) -> None:
    data = space.data
    row = data.get(key)
    if row is None:
        return
    row = _hash_of(row)
    before = value_bytes(row)
    left = hashes.removed(row, names)
    if left is None:
        _gone(space, key, before)
    else:
        data[key] = left
        space.used += value_bytes(left) - before


def _remove_members(space: Keyspace, key: bytes, members: tuple[bytes, ...]) -> None:
    data = space.data
    zset = data.get(key)
    if zset is None:
        return
    zset = _zset_of(zset)
    before = value_bytes(zset)
    if type(zset) is not ZSet:
        left = zset
        for member in members:
            left = lp.removed(left, member)
        if left == lp.EMPTY:
            _gone(space, key, before)
        elif left is not zset:
            data[key] = left
            space.used += value_bytes(left) - before
        return
    for member in members:
        zset.remove(member)
    if zset:
        space.used += value_bytes(zset) - before
    else:
        _gone(space, key, before)


def _delete(space: Keyspace, key: bytes) -> None:
    """The key goes (it is there)."""
    _gone(space, key, value_bytes(space.data[key]))


def _gone(space: Keyspace, key: bytes, size: int) -> None:
    """The key goes with its value, which cost `size` as last counted; a big value is
    left to `free`."""
    value = space.data.pop(key)
    space.used -= sizes.key(key) + size
    if space.scan is not None:
        space.scan = space.scan.removed(key)
    if _is_big(value):
        space.discard({key: value})


FREE_WHOLE: Final = 4096  # fields or members a value may have to be freed at once


def _is_big(value: Value) -> TypeGuard[BigHash | ZSet]:
    return type(value) is not bytes and len(value) > FREE_WHOLE


def _list_parts(value: BigHash | ZSet, parts: list[list[Any]]) -> None:
    """References to a big value's fields and values (a sorted set's members and packed
    keys), for `free` to let go of in slices after the value itself goes."""
    mapping: dict[bytes, Any] = value.keys if type(value) is ZSet else value
    parts.append(list(mapping))
    parts.append(list(mapping.values()))


def _new_zset(space: Keyspace, key: bytes, first: bytes) -> ZSet | bytes:
    """A set as Redis 7.0 makes it for a ZADD whose first member is `first`: born a
    skiplist when no listpack may hold a member or `first` is too long for one (and then
    it keeps -0 scores from its first member on); otherwise a listpack, which the members
    after the first convert as they come (storing -0 as 0 until then). Not stored yet:
    its key is counted here, its value by the caller."""
    space.used += sizes.key(key)
    if space.scan is not None:
        space.scan = space.scan.added(key)
    limits = space.limits
    if limits.zset_entries == 0 or len(first) > limits.zset_value:
        return skiplist()
    return lp.EMPTY


def _hset(space: Keyspace, op: Sequence[Any]) -> None:
    # tuple() of a tuple is the tuple itself; the loader's ops are lists
    set_fields(space, op[1], tuple(op[2::2]), tuple(op[3::2]))


def _hdel(space: Keyspace, op: Sequence[Any]) -> None:
    _remove_fields(space, op[1], op[2:])


def _hincrby(space: Keyspace, op: Sequence[Any]) -> None:
    _, key, name, by = op
    row = space.data.get(key)
    current = None if row is None else hashes.get(_hash_of(row), name)
    value = b"%d" % ((int(current) if current is not None else 0) + int(by))
    set_fields(space, key, (name,), (value,))


def _del(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    for key in op[1:]:
        if key in data:
            _delete(space, key)


def _zadd(space: Keyspace, op: Sequence[Any]) -> None:
    data = space.data
    key = op[1]
    zset = data.get(key)
    limits = space.limits
    if zset is None:
        zset = _new_zset(space, key, op[3])
        before = 0
    else:
        zset = _zset_of(zset)
        before = value_bytes(zset)
    for i in range(2, len(op), 2):
        if type(zset) is ZSet:
            zset.add(op[i + 1], float(op[i]), limits)
        else:
            zset = added_to(zset, op[i + 1], float(op[i]), limits)
    data[key] = zset
    space.used += value_bytes(zset) - before


def _zrem(space: Keyspace, op: Sequence[Any]) -> None:
    _remove_members(space, op[1], tuple(op[2:]))  # the loader's ops are lists


def _flushall(space: Keyspace, op: Sequence[Any]) -> None:
    old, space.data = space.data, {}
    space.scan = None
    space.used = 0
    space.discard(old)


_OP_NAMES: Final = frozenset((b"HSET", b"ZADD", b"ZREM", b"DEL", b"HINCRBY", b"HDEL",
                               b"FLUSHALL"))


def _apply_op(space: Keyspace, op: Sequence[Any]) -> None:
    """One op by its name, in native calls: through a dict of the functions each op was
    a generic call (callgrind: the FAIL scenario's `Keyspace.apply` its biggest part)."""
    name = op[0]
    if name == b"HSET":
        _hset(space, op)
    elif name == b"ZADD":
        _zadd(space, op)
    elif name == b"ZREM":
        _zrem(space, op)
    elif name == b"DEL":
        _del(space, op)
    elif name == b"HINCRBY":
        _hincrby(space, op)
    elif name == b"HDEL":
        _hdel(space, op)
    elif name == b"FLUSHALL":
        _flushall(space, op)
    else:
        raise KeyError(name)  # not in _OP_NAMES: no plan holds one


# ShapeApplier's kinds of op: the primitive each is applied with
_FIELDS: Final = 0  # HSET with constant field names
_MEMBER: Final = 1  # ZADD of one member
_GONE: Final = 2  # ZREM of one member
_KEY: Final = 3  # DEL of one key
_OTHER: Final = 4  # anything else: the generic applier of its name
_PAIR: Final = 5  # HSET of one field whose name is a value (gactive's group)
_FIELD_GONE: Final = 6  # HDEL of one field (gactive's, when a lane's last job leaves)


class ShapeApplier:
    """The writes of ops built from one template (a Shape's), with each op's primitive
    and constant field names chosen once, where the generic `apply` looks each op up
    by name and slices its names out. Compiled, it is native code; the earlier
    applier, Python source generated per Shape and exec'd, stayed interpreted in the
    compiled core and cost a job cycle about 1 us more."""

    __slots__ = ("kinds", "names")

    def __init__(self, template: tuple[tuple[Any, ...], ...]) -> None:
        kinds: list[int] = []
        names: list[tuple[bytes, ...]] = []
        for op in template:
            name = op[0]
            if name not in _OP_NAMES:  # now, not halfway through a plan
                raise KeyError(name)
            constant_names = all(isinstance(field, bytes) for field in op[2::2])
            if name == b"HSET" and constant_names:
                kinds.append(_FIELDS)
            elif name == b"ZADD" and len(op) == 4:
                kinds.append(_MEMBER)
            elif name == b"ZREM" and len(op) == 3:
                kinds.append(_GONE)
            elif name == b"DEL" and len(op) == 2:
                kinds.append(_KEY)
            elif name == b"HSET" and len(op) == 4:
                kinds.append(_PAIR)
            elif name == b"HDEL" and len(op) == 3:
                kinds.append(_FIELD_GONE)
            else:
                kinds.append(_OTHER)
            names.append(tuple(op[2::2]) if kinds[-1] == _FIELDS else ())
        self.kinds = kinds
        self.names = names

    def apply(self, space: Keyspace, ops: list[tuple[Any, ...]]) -> None:
        kinds = self.kinds
        for i in range(len(ops)):
            op = ops[i]
            kind = kinds[i]
            if kind == _FIELDS:
                set_fields(space, op[1], self.names[i], op[3::2])
            elif kind == _MEMBER:
                add_member(space, op[1], op[2], op[3])
            elif kind == _GONE:
                remove_member(space, op[1], op[2])
            elif kind == _KEY:
                key = op[1]
                if key in space.data:
                    _delete(space, key)
            elif kind == _PAIR:
                set_fields(space, op[1], (op[2],), (op[3],))
            elif kind == _FIELD_GONE:
                remove_field(space, op[1], op[2])
            else:
                _apply_op(space, op)
        if space.watched:
            space.touched(tuple([op[1] for op in ops]))
