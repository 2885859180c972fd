"""The hash type: a compact row for small hashes, a dict for big ones.

A job row has a handful of fields, and a queue holds millions of rows that
share the same few field names in the same order. Held as a dict, each row
would cost CPython's smallest table (184-224 bytes) before its values. So a
small hash is a `Row`: a tuple `(mark, value, value, ...)` whose `Schema`
(the field names in order, and where each one sits) is shared by every row
with the same fields: a 3-field row costs 72 bytes. The row holds its schema's
`mark`, a small int that indexes the table of shared schemas, not the Schema
itself: a tuple of ints and bytes is one the garbage collector stops tracking
the first time it looks at it (CPython untracks tuples of untracked items),
so a million rows cost the collector nothing after their first collection,
where rows holding an object were traversed by every older collection. Rows are immutable, so a
planner that reads one cannot change the store by mistake; a write builds the
new row. A hash that passes COMPACT_MAX fields becomes a `BigHash` (a dict),
which costs less than a schema of its own once fields no longer repeat.

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
from operator import itemgetter
from typing import Any, Final, cast

from emqd import errors
from emqd.numbers import COMPILED, INT64_MAX, INT64_MIN, parse_int
from emqd.store import sizes
from emqd.store.scan_index import ScanIndex

COMPACT_MAX: Final = 32  # fields held in a Row; more make a BigHash
SCHEMAS_MAX: Final = 65_536  # shared schemas remembered; past it new ones are not shared
TRANSITIONS_MAX: Final = 64  # cached HSET shapes per schema


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

    `slot[field]` is the field's index in the row tuple (1-based: slot 0 holds
    the schema's `mark`). `listpack` is Redis's encoding of rows of this schema.
    What an HSET of some field names makes of it is cached (`after`), so a verb's
    HSET costs one dict lookup. `mark` is what a row holds in slot 0: the schema's
    index in the table of shared schemas (one int object for all its rows: typed
    `object`, so compiled code stores the object rather than a fresh box per row),
    or the schema itself when it is not shared (past SCHEMAS_MAX).
    """

    __slots__ = ("fields", "slot", "listpack", "_after", "mark")

    def __init__(self, fields: tuple[bytes, ...], listpack: bool) -> None:
        self.fields = fields
        self.slot = {name: i + 1 for i, name in enumerate(fields)}
        self.listpack = listpack
        self._after: dict[tuple[bytes, ...], Transition] = {}
        self.mark: object = self

    def after(self, names: tuple[bytes, ...]) -> Transition:
        """What writing `names` (new ones appended) makes of this schema."""
        hit = self._after.get(names)
        if hit is None:
            hit = Transition(self, names)
            if len(self._after) < TRANSITIONS_MAX:
                self._after[names] = hit
        return hit


class Transition:
    """An HSET of some names on one schema: the schema after it, both ways, and the slots.

    Both encodings of the result are kept because which one applies depends on
    the values written and on the limits of the moment (CONFIG SET changes them).
    The new row is assembled in C: `assemble` is an itemgetter that picks each
    slot of the new tuple from `(*old row, *values written, new schema)`, the
    last value of a name written twice winning, as HSET's does.
    """

    __slots__ = ("listpack", "hashtable", "widest", "count", "assemble", "slots")

    def __init__(self, schema: Schema, names: tuple[bytes, ...]) -> None:
        fields = list(schema.fields)
        source = list(range(len(fields) + 1))  # new slot -> index in (*row, *values, schema)
        slot = dict(schema.slot)
        for i, name in enumerate(names):
            where = slot.get(name)
            if where is None:
                fields.append(name)
                where = slot[name] = len(fields)
                source.append(0)
            source[where] = len(schema.fields) + 1 + i
        source[0] = len(schema.fields) + 1 + len(names)  # the new schema's mark, given last
        self.listpack = schema_of(tuple(fields), True)
        self.hashtable = schema_of(tuple(fields), False)
        self.widest = max(map(len, names), default=0)
        self.count = len(fields)
        self.assemble = itemgetter(*source)
        # Where each name written sits, when none is new (the common HSET: a job's
        # state, a counter): compiled, `written` then copies the row and sets those
        # slots, one tuple made where the itemgetter's way makes two and a list.
        # (None interpreted, where the itemgetter costs less: see `written`.)
        self.slots: tuple[int, ...] | None = (
            tuple(schema.slot[name] for name in names)
            if COMPILED and len(fields) == len(schema.fields) else None)

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
            schema.mark = len(_marked)
            _marked.append(schema)
    return schema


def schema(row: Row) -> Schema:
    """The schema of a Row, from the mark in its slot 0."""
    mark: object = row[0]
    if isinstance(mark, int):
        return _marked[mark]
    return cast(Schema, mark)  # an unshared schema is its own mark


_EMPTY: Final = schema_of((), True)
_EMPTY_ROW: Final = (_EMPTY.mark,)

Row = tuple[Any, ...]  # (its schema's mark, value, ...): see the module docstring


class BigHash(dict[bytes, bytes]):
    """A hash with more than COMPACT_MAX fields; `listpack` is Redis's encoding of it,
    `scan` the index of an HSCAN in progress (store/scan_index.py), or None, and
    `nbytes` what it costs (store/sizes.py), kept as it changes."""

    __slots__ = ("listpack", "scan", "nbytes")
    listpack: bool
    scan: ScanIndex | None
    nbytes: int


Hash = Row | BigHash


# --- reads ---------------------------------------------------------------------------------
def get(row: Hash, name: bytes) -> bytes | None:
    """The value of field `name`, None when absent."""
    if isinstance(row, BigHash):
        return row.get(name)
    where = schema(row).slot.get(name)
    return None if where is None else row[where]


def has(row: Hash, name: bytes) -> bool:
    if isinstance(row, BigHash):
        return name in row
    return name in schema(row).slot


def field_set(row: Hash) -> Container[bytes]:
    """Something `field in` answers for (the fields, never the values)."""
    return row if isinstance(row, BigHash) else schema(row).slot


def length(row: Hash) -> int:
    return len(row) if isinstance(row, BigHash) else len(row) - 1


def names(row: Hash) -> Iterable[bytes]:
    """The field names, in order."""
    return row.keys() if isinstance(row, BigHash) else schema(row).fields


def values(row: Hash) -> Iterable[bytes]:
    return row.values() if isinstance(row, BigHash) else row[1:]


def items(row: Hash) -> Iterator[tuple[bytes, bytes]]:
    """(field, value) pairs, in order."""
    if isinstance(row, BigHash):
        return iter(row.items())
    return zip(schema(row).fields, row[1:], strict=True)


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
        if transition.count > COMPACT_MAX:
            return written(_to_big(row, new_schema.listpack), names, values, limits)
        slots = transition.slots
        if slots is None:  # a new field, or interpreted: the itemgetter
            return transition.assemble((*row, *values,  # type: ignore[no-any-return]
                                        new_schema.mark))
        new = list(row)
        new[0] = new_schema.mark
        for i in range(len(slots)):
            new[slots[i]] = values[i]
        return tuple(new)
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
        fields = tuple(old.fields[i] for i in kept)
        return (schema_of(fields, old.listpack).mark, *(row[i + 1] for i in kept))
    if row.scan is not None:
        names = list(names)
        _scan_note(row, [name for name in names if name in row], False)
    for name in names:
        value = row.pop(name, None)
        if value is not None:
            row.nbytes -= sizes.field(name, value)
    return row if row else None


def _to_big(row: Row, listpack: bool) -> BigHash:
    big = BigHash(zip(schema(row).fields, row[1:], strict=True))
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
    if result > INT64_MAX or result < INT64_MIN:
        raise errors.OVERFLOW()
    return result
