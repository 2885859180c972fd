"""The hash type: a compact row for small hashes, a dict for big ones.

A job row has a handful of fields, and a queue holds millions of rows that
share the same few field names in the same order. Held as a dict, each row
would cost CPython's smallest table (184-224 bytes) before its values, and as
a tuple of its values, a tuple (80 bytes for three) and an object a value
(a 100-byte payload alone is 144). So a small hash is a `Row`: one bytes
object, as Redis holds a small hash in one listpack,

    row    = 0x00, mark (2 bytes big-endian), then each value in field order
    value  = length, the value's bytes
    length = 1 byte, or 0xFF + 4 bytes big-endian when >= 255

whose `Schema` (the field names in order, and where each one sits) is shared
by every row with the same fields; `mark` indexes the table of shared schemas.
A pending job's row is then 160 bytes where the tuple and its payload were
224, and it is one object the garbage collector never tracks. The leading
0x00 is what tells a row from the other value held as plain bytes, a small
sorted set (store/listpack.py), which starts with its count and is never
empty. A read slices the value out (a copy of its bytes); a write builds the
next row (a copy of at most ROW_MAX bytes, as Redis's listpack moves its bytes
on a write), so a planner that reads a row cannot change the store by
mistake. A hash past COMPACT_MAX fields or ROW_MAX bytes, or whose schema is
past SCHEMAS_MAX, becomes a `BigHash` (a dict, written in place), which costs
less than a schema of its own once fields no longer repeat, and copies no big
value on a write.

Field order is insertion order in both forms, as in Redis's listpack (an
updated field keeps its place; HDEL closes the gap), so HGETALL of a small
hash answers what Redis answers, byte for byte.

Redis's own encoding of the same hash (what OBJECT ENCODING answers, and what
decides whether HSCAN returns everything in one call) is tracked exactly: a
hash is `listpack` until it has more than `hash-max-listpack-entries` fields or
a field or value longer than `hash-max-listpack-value` bytes, then `hashtable`
for good, as Redis never converts back. That flag lives in the schema (a row's
schema says `listpack` or not) and in `BigHash.listpack`; it is independent of
emqd's own compact/dict choice.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from typing import Final

from mypy_extensions import i64

from emqd import errors
from emqd.compat.numbers import INT64_MAX, INT64_MIN, parse_int
from emqd.concat import LONG, joined, length_prefix
from emqd.store import sizes
from emqd.store.scan_index import ScanIndex

COMPACT_MAX: Final = 32  # fields held in a Row; more make a BigHash
ROW_MAX: Final = 4096  # bytes a Row may have; a longer one is a BigHash
SCHEMAS_MAX: Final = 65_536  # shared schemas (a row's mark is 2 bytes); past it, BigHashes
TRANSITIONS_MAX: Final = 64  # cached HSET shapes per schema
HEAD: Final = 3  # a row's 0x00 and mark, before its values
_SHORT: Final = 2**62 - 1  # the largest int a compiled int holds unboxed


class Limits:
    """Redis's encoding thresholds (CONFIG SET changes them at run time)."""

    __slots__ = ("hash_entries", "hash_value", "zset_entries", "zset_value")

    def __init__(self) -> None:
        self.hash_entries = 512  # hash-max-listpack-entries
        self.hash_value = 64  # hash-max-listpack-value
        self.zset_entries = 128  # zset-max-listpack-entries
        self.zset_value = 64  # zset-max-listpack-value


class Schema:
    """The field names of a row, in order; shared by every row with the same fields.

    `slot[field]` is the field's place in the row (1-based). `listpack` is Redis's
    encoding of rows of this schema. What an HSET of some field names makes of it is
    cached (`after`), so a verb's HSET costs one dict lookup. `mark` is the schema's
    index in the table of shared schemas (-1 past SCHEMAS_MAX: no row has such a
    schema, a hash of it is a BigHash), and `head` a row's first bytes, which hold it.
    """

    __slots__ = ("fields", "slot", "listpack", "_after", "mark", "head")

    def __init__(self, fields: tuple[bytes, ...], listpack: bool) -> None:
        self.fields = fields
        self.slot = {name: i + 1 for i, name in enumerate(fields)}
        self.listpack = listpack
        self._after: dict[tuple[bytes, ...], Transition] = {}
        self.mark = -1
        self.head = b""

    def after(self, names: tuple[bytes, ...]) -> Transition:
        """What writing `names` (new ones appended) makes of this schema."""
        hit = self._after.get(names)
        if hit is None:
            hit = Transition(self, names)
            if len(self._after) < TRANSITIONS_MAX:
                self._after[names] = hit
        return hit


class Transition:
    """An HSET of some names on one schema: the schema after it, both ways, and where
    each value goes.

    Both encodings of the result are kept because which one applies depends on
    the values written and on the limits of the moment (CONFIG SET changes them).
    `replaced` is (slot, index in the values written) for each existing field written,
    in slot order, the last value of a name written twice winning, as HSET's does;
    `appended` the indexes of the values of the new fields, in their order.
    """

    __slots__ = ("listpack", "hashtable", "widest", "count", "replaced", "appended")

    def __init__(self, schema: Schema, names: tuple[bytes, ...]) -> None:
        fields = list(schema.fields)
        slot = dict(schema.slot)
        source: dict[int, int] = {}  # slot -> index of the value that lands there
        for i, name in enumerate(names):
            where = slot.get(name)
            if where is None:
                fields.append(name)
                where = slot[name] = len(fields)
            source[where] = i
        old = len(schema.fields)
        if len(fields) > COMPACT_MAX:  # a BigHash's: not shared, so not one of SCHEMAS_MAX
            self.listpack = Schema(tuple(fields), True)
            self.hashtable = Schema(tuple(fields), False)
        else:
            self.listpack = schema_of(tuple(fields), True)
            self.hashtable = schema_of(tuple(fields), False)
        self.widest = max(map(len, names), default=0)
        self.count = len(fields)
        self.replaced = tuple(sorted((where, i) for where, i in source.items() if where <= old))
        self.appended = tuple(source[where] for where in range(old + 1, len(fields) + 1))

    def target(self, values: tuple[bytes, ...], limits: Limits) -> Schema:
        """The new schema of a listpack row: still `listpack` only if Redis would keep it."""
        limit = limits.hash_value
        if self.count > limits.hash_entries or self.widest > limit:
            return self.hashtable
        for value in values:
            if len(value) > limit:
                return self.hashtable
        return self.listpack


_schemas: Final[dict[tuple[tuple[bytes, ...], bool], Schema]] = {}
_marked: Final[list[Schema]] = []  # the shared schemas, by mark


def schema_of(fields: tuple[bytes, ...], listpack: bool) -> Schema:
    """The shared schema of these fields (a new unshared one once SCHEMAS_MAX are known)."""
    schema = _schemas.get((fields, listpack))
    if schema is None:
        schema = Schema(fields, listpack)
        if len(_schemas) < SCHEMAS_MAX:
            _schemas[(fields, listpack)] = schema
            schema.mark = mark = len(_marked)
            schema.head = bytes((0, mark >> 8, mark & 0xFF))
            _marked.append(schema)
    return schema


def is_row(value: bytes) -> bool:
    """A stored bytes value is a Row (not a listpack sorted set, which starts with its
    count, never 0: an empty set is not stored)."""
    return value[0] == 0


def mark(row: bytes) -> int:
    """The mark of a Row's schema (the same int for all rows of one schema)."""
    return (row[1] << 8) | row[2]


def schema(row: bytes) -> Schema:
    """The schema of a Row."""
    return _marked[mark(row)]


_EMPTY: Final = schema_of((), True)
_EMPTY_ROW: Final = _EMPTY.head

Row = bytes  # 0x00, a schema's mark, the values: see the module docstring


class BigHash(dict[bytes, bytes]):
    """A hash held as a dict; `listpack` is Redis's encoding of it,
    `scan` the index of an HSCAN in progress (store/scan_index.py), or None, and
    `nbytes` what it costs (store/sizes.py), kept as it changes."""

    __slots__ = ("listpack", "scan", "nbytes")
    listpack: bool
    scan: ScanIndex | None
    nbytes: int


Hash = Row | BigHash


# --- a Row's values ------------------------------------------------------------------------
def _skip(row: bytes, at: i64) -> i64:
    """The offset just past the value that starts at `at`."""
    n: i64 = row[at]
    if n < LONG:
        return at + 1 + n
    return at + 5 + int.from_bytes(row[at + 1:at + 5], "big")


def _value_at(row: bytes, at: i64) -> bytes:
    """The value that starts at `at`."""
    n: i64 = row[at]
    if n < LONG:
        return row[at + 1:at + 1 + n]
    n = int.from_bytes(row[at + 1:at + 5], "big")
    return row[at + 5:at + 5 + n]


def _slot_value(row: bytes, where: int) -> bytes:
    """The value in slot `where` (1-based)."""
    at: i64 = HEAD
    left: i64 = where - 1  # an i64 count: a `for _ in range` boxed each `_` compiled
    while left > 0:
        n: i64 = row[at]
        at = at + 1 + n if n < LONG else _skip(row, at)  # a short value inline
        left -= 1
    n = row[at]
    return row[at + 1:at + 1 + n] if n < LONG else _value_at(row, at)  # the same


def _values(row: bytes) -> list[bytes]:
    """Every value of a Row, in order."""
    out: list[bytes] = []
    at: i64 = HEAD
    end: i64 = len(row)
    while at < end:
        out.append(_value_at(row, at))
        at = _skip(row, at)
    return out


def _row(schema: Schema, values: Iterable[bytes]) -> bytes:
    """The Row of these values (in the schema's field order)."""
    parts = [schema.head]
    for value in values:
        parts.append(length_prefix(len(value)))
        parts.append(value)
    return joined(parts)


# --- reads ---------------------------------------------------------------------------------
def get(row: Hash, name: bytes) -> bytes | None:
    """The value of field `name`, None when absent."""
    if isinstance(row, BigHash):
        return row.get(name)
    where = schema(row).slot.get(name)
    return None if where is None else _slot_value(row, where)


def has(row: Hash, name: bytes) -> bool:
    if isinstance(row, BigHash):
        return name in row
    return name in schema(row).slot


def field_set(row: Hash) -> Container[bytes]:
    """Something `field in` answers for (the fields, never the values)."""
    return row if isinstance(row, BigHash) else schema(row).slot


def length(row: Hash) -> int:
    return len(row) if isinstance(row, BigHash) else len(schema(row).fields)


def names(row: Hash) -> Iterable[bytes]:
    """The field names, in order."""
    return row.keys() if isinstance(row, BigHash) else schema(row).fields


def values(row: Hash) -> Iterable[bytes]:
    return row.values() if isinstance(row, BigHash) else _values(row)


def items(row: Hash) -> Iterator[tuple[bytes, bytes]]:
    """(field, value) pairs, in order."""
    if isinstance(row, BigHash):
        return iter(row.items())
    return zip(schema(row).fields, _values(row), strict=True)


def as_dict(row: Hash | None) -> dict[bytes, bytes]:
    """A plain dict copy (replies, tests): later writes do not change it."""
    if row is None:
        return {}
    return dict(items(row))


def is_listpack(row: Hash) -> bool:
    """True while Redis would hold this hash as a listpack (OBJECT ENCODING, HSCAN)."""
    return row.listpack if isinstance(row, BigHash) else schema(row).listpack


# --- writes (keyspace.apply only): each returns the new value -----------------------------
def written(row: Hash | None, names: tuple[bytes, ...], values: tuple[bytes, ...],
            limits: Limits) -> Hash:
    """`row` after HSET of `names[i] = values[i]` (a missing row is empty)."""
    if row is None:
        row = _EMPTY_ROW
    if not isinstance(row, BigHash):
        old = schema(row)
        transition = old._after.get(names) or old.after(names)
        new_schema = transition.target(values, limits) if old.listpack else transition.hashtable
        if transition.count > COMPACT_MAX or new_schema.mark < 0 or _too_long(values):
            return written(_to_big(row, new_schema.listpack), names, values, limits)
        # The new row: its head, the old row's runs of values kept, each value written
        # in its slot's place, then the new fields' values.
        parts = [new_schema.head]
        at: i64 = HEAD
        run: i64 = HEAD
        slot = 1
        for where, i in transition.replaced:
            while slot < where:
                at = _skip(row, at)
                slot += 1
            if at > run:
                parts.append(row[run:at])
            value = values[i]
            parts.append(length_prefix(len(value)))
            parts.append(value)
            at = _skip(row, at)
            slot += 1
            run = at
        if run < len(row):
            parts.append(row[run:])
        for i in transition.appended:
            value = values[i]
            parts.append(length_prefix(len(value)))
            parts.append(value)
        new = joined(parts)
        if len(new) > ROW_MAX:
            return _to_big(new, new_schema.listpack)
        return new
    big = row  # a BigHash: written in place
    if big.scan is not None:
        _scan_note(big, [name for name in dict.fromkeys(names) if name not in big], True)
    # An index loop and `listpack` read once: zip(strict=True) and an attribute of this
    # dict subclass are generic calls in the compiled core (gactive's HSET on every
    # lane CLAIM comes here).
    listpack = big.listpack
    longest = limits.hash_value
    nbytes = big.nbytes
    for i in range(len(names)):
        name, value = names[i], values[i]
        was = big.get(name)
        nbytes += sizes.of_bytes(len(value)) + (
            sizes.field(name, b"") if was is None else -sizes.of_bytes(len(was)))
        big[name] = value
        if listpack and (len(name) > longest or len(value) > longest):
            listpack = False
    if listpack and len(big) > limits.hash_entries:
        listpack = False
    if not listpack and big.listpack:
        big.listpack = False
    big.nbytes = nbytes
    return big


def removed(row: Hash, names: Iterable[bytes]) -> Hash | None:
    """`row` after HDEL of `names` (absent ones ignored); None once it is empty."""
    if not isinstance(row, BigHash):
        gone = set(names)
        old = schema(row)
        kept = [i for i, name in enumerate(old.fields) if name not in gone]
        if len(kept) == len(old.fields):
            return row
        if not kept:
            return None
        new_schema = schema_of(tuple(old.fields[i] for i in kept), old.listpack)
        if new_schema.mark < 0:
            return _to_big(row, old.listpack, kept)
        values = _values(row)
        return _row(new_schema, [values[i] for i in kept])
    if row.scan is not None:
        names = list(names)
        _scan_note(row, [name for name in names if name in row], False)
    for name in names:
        value = row.pop(name, None)
        if value is not None:
            row.nbytes -= sizes.field(name, value)
    return row if row else None


def _too_long(values: tuple[bytes, ...]) -> bool:
    """A value longer than a Row may be: the hash becomes a BigHash before the value is
    copied into a row (a 64 MiB HSET would otherwise peak at three times its size)."""
    for value in values:
        if len(value) > ROW_MAX:
            return True
    return False


def _to_big(row: bytes, listpack: bool, kept: list[int] | None = None) -> BigHash:
    """A Row's fields (those at the indexes `kept`, when given) as a BigHash."""
    pairs = list(zip(schema(row).fields, _values(row), strict=True))
    big = BigHash(pairs if kept is None else [pairs[i] for i in kept])
    big.listpack = listpack
    big.scan = None
    nbytes = sizes.BIG_HASH
    for name, value in big.items():
        nbytes += sizes.field(name, value)
    big.nbytes = nbytes
    return big


def _scan_note(big: BigHash, names: list[bytes], added: bool) -> None:
    """Keep an HSCAN's index exact: `names` come (added) or go."""
    index = big.scan
    for name in names:
        if index is None:
            break
        index = index.added(name) if added else index.removed(name)
    big.scan = index


# --- HINCRBY's reading of a stored value ----------------------------------------------------
def incremented(current: bytes | None, by: int) -> int:
    """The value HINCRBY would store, or the ReplyError it would answer.

    A missing field counts as 0. A stored value that is not a 64-bit integer as
    Redis reads one raises `ERR hash value is not an integer`; a result outside
    64 bits raises `ERR increment or decrement would overflow`.
    """
    value = 0 if current is None else parse_int(current)
    if value is None:
        raise errors.HASH_NOT_INTEGER()
    result = value + by
    # Compiled, an int within 62 bits compares inline; against INT64_MAX itself (a boxed
    # int) each test was a call of ~200 instructions, twice a counter.
    if -_SHORT <= result <= _SHORT:
        return result
    if result > INT64_MAX or result < INT64_MIN:
        raise errors.OVERFLOW()
    return result
