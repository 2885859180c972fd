"""store/hash.py: HINCRBY's reading of a stored value, compact rows, and Redis's encoding."""

from __future__ import annotations

import gc

import pytest

from emqd.errors import HASH_NOT_INTEGER, OVERFLOW, Refusal, ReplyError
from emqd.store import hash as hashes
from emqd.store.hash import Limits, incremented

LISTPACK_ENTRIES = Limits().hash_entries
LISTPACK_VALUE = Limits().hash_value


@pytest.mark.parametrize(
    "current, by, expected",
    [
        (None, 1, 1), (b"5", -7, -2), (b"-9223372036854775807", -1, -(2**63)),
        (b"9223372036854775806", 1, 2**63 - 1), (b"0", 0, 0),
        (b"9223372036854775807", 1, OVERFLOW), (b"-9223372036854775808", -1, OVERFLOW),
        # either side of 2**62, where a compiled int stops being held unboxed
        (b"4611686018427387902", 1, 2**62 - 1), (b"4611686018427387903", 1, 2**62),
        (b"-4611686018427387903", -1, -(2**62)), (b"-4611686018427387904", -1, -(2**62) - 1),
        (b"01", 1, HASH_NOT_INTEGER), (b"+1", 1, HASH_NOT_INTEGER), (b" 1", 1, HASH_NOT_INTEGER),
        (b"-0", 1, HASH_NOT_INTEGER), (b"1.5", 1, HASH_NOT_INTEGER), (b"", 1, HASH_NOT_INTEGER),
    ],
)
def test_incremented(current: bytes | None, by: int, expected: int | ReplyError) -> None:
    if isinstance(expected, (ReplyError, Refusal)):
        with pytest.raises(ReplyError) as caught:
            incremented(current, by)
        assert caught.value == expected
    else:
        assert incremented(current, by) == expected


def _hash(pairs: list[tuple[bytes, bytes]], limits: Limits | None = None) -> hashes.Hash | None:
    row = None
    for name, value in pairs:
        row = hashes.written(row, (name,), (value,), limits or Limits())
    return row


@pytest.mark.parametrize(
    "pairs, listpack",
    [
        ([(b"f", b"v" * LISTPACK_VALUE)], True),
        ([(b"f", b"v" * (LISTPACK_VALUE + 1))], False),
        ([(b"f" * (LISTPACK_VALUE + 1), b"v")], False),
        ([(b"%d" % i, b"") for i in range(LISTPACK_ENTRIES)], True),
        ([(b"%d" % i, b"") for i in range(LISTPACK_ENTRIES + 1)], False),
    ],
)
def test_redis_encoding_is_tracked(pairs: list, listpack: bool) -> None:
    row = _hash(pairs)
    assert row is not None and hashes.is_listpack(row) is listpack


def test_a_hash_never_converts_back_to_a_listpack() -> None:
    row = _hash([(b"a", b"x" * 100), (b"b", b"1")])
    assert row is not None and not hashes.is_listpack(row)
    row = hashes.written(row, (b"a",), (b"short",), Limits())
    row = hashes.removed(row, [b"a"])
    assert row is not None and not hashes.is_listpack(row)


def test_rows_share_their_schema_and_keep_insertion_order() -> None:
    one = _hash([(b"state", b"pending"), (b"payload", b"p1")])
    two = _hash([(b"state", b"pending"), (b"payload", b"p2")])
    assert type(one) is bytes and type(two) is bytes and one[0] == 0
    assert hashes.mark(one) == hashes.mark(two) and hashes.schema(one) is hashes.schema(two)
    one = hashes.written(one, (b"attempts", b"state"), (b"1", b"active"), Limits())
    assert hashes.as_dict(one) == {b"state": b"active", b"payload": b"p1", b"attempts": b"1"}
    assert list(hashes.names(one)) == [b"state", b"payload", b"attempts"]
    one = hashes.removed(one, [b"state", b"nope"])
    assert list(hashes.items(one)) == [(b"payload", b"p1"), (b"attempts", b"1")]  # type: ignore[arg-type]
    assert hashes.removed(one, [b"payload", b"attempts"]) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("long", [254, 255, 256, 70_000])
def test_a_row_holds_values_of_any_length_in_place(long: int) -> None:
    """A value's length takes 1 byte below 255, 5 from 255 on; the fields after a long
    one read and write as any other. Past ROW_MAX bytes the hash is a BigHash."""
    limits = Limits()
    row = hashes.written(None, (b"a", b"big", b"z"), (b"1", b"x" * long, b"2"), limits)
    row = hashes.written(row, (b"z", b"a", b"new"), (b"3", b"", b"4"), limits)
    assert hashes.as_dict(row) == {b"a": b"", b"big": b"x" * long, b"z": b"3", b"new": b"4"}
    assert hashes.get(row, b"z") == b"3" and hashes.get(row, b"new") == b"4"
    assert isinstance(row, hashes.BigHash) is (long > hashes.ROW_MAX)
    row = hashes.removed(row, [b"big"])
    assert row is not None and hashes.as_dict(row) == {b"a": b"", b"z": b"3", b"new": b"4"}


def test_a_name_written_twice_keeps_its_last_value() -> None:
    row = hashes.written(None, (b"a", b"b", b"a"), (b"1", b"2", b"3"), Limits())
    assert list(hashes.items(row)) == [(b"a", b"3"), (b"b", b"2")]
    row = hashes.written(row, (b"b", b"c", b"b", b"c"), (b"4", b"5", b"6", b"7"), Limits())
    assert list(hashes.items(row)) == [(b"a", b"3"), (b"b", b"6"), (b"c", b"7")]


def test_a_value_equal_to_a_field_name_is_not_a_field() -> None:
    row = _hash([(b"a", b"b")])
    assert row is not None
    assert hashes.get(row, b"b") is None and not hashes.has(row, b"b")
    assert b"b" not in hashes.field_set(row)


def test_many_fields_move_to_a_dict_that_still_tracks_the_encoding() -> None:
    row = _hash([(b"f%d" % i, b"v") for i in range(hashes.COMPACT_MAX + 5)])
    assert isinstance(row, hashes.BigHash) and hashes.is_listpack(row)
    assert hashes.length(row) == hashes.COMPACT_MAX + 5
    assert list(hashes.names(row))[:3] == [b"f0", b"f1", b"f2"]


def test_the_limits_of_the_moment_decide() -> None:
    limits = Limits()
    limits.hash_value = 3
    row = _hash([(b"a", b"1234")], limits)
    assert row is not None and not hashes.is_listpack(row)
    assert hashes.is_listpack(_hash([(b"a", b"1234")]))  # type: ignore[arg-type]


def test_a_row_is_never_tracked_by_the_garbage_collector() -> None:
    """A row is one bytes object: a million rows are nothing the collector traverses."""
    limits = Limits()
    row = hashes.written(None, (b"state", b"payload"), (b"pending", b"x" * 100), limits)
    row = hashes.written(row, (b"state",), (b"active",), limits)  # the copying path too
    assert type(row) is bytes and not gc.is_tracked(row)
    assert hashes.as_dict(row) == {b"state": b"active", b"payload": b"x" * 100}


def test_a_hash_whose_schema_is_not_shared_is_a_dict() -> None:
    """Past SCHEMAS_MAX a new schema is not shared and has no mark for a row to hold: a
    hash of it is a BigHash, which reads and writes as any other hash."""
    base = hashes.schema_of((b"unshared-a",), True)
    transition = hashes.Transition(base, (b"unshared-b",))
    transition.listpack = transition.hashtable = hashes.Schema((b"unshared-a", b"unshared-b"), True)
    assert transition.listpack.mark == -1
    base._after[(b"unshared-b",)] = transition  # what an HSET of that name makes of base
    try:
        row = hashes.written(None, (b"unshared-a",), (b"1",), Limits())
        assert type(row) is bytes
        big = hashes.written(row, (b"unshared-b",), (b"2",), Limits())
        assert isinstance(big, hashes.BigHash) and hashes.is_listpack(big)
        assert hashes.as_dict(big) == {b"unshared-a": b"1", b"unshared-b": b"2"}
    finally:
        del base._after[(b"unshared-b",)]


@pytest.mark.parametrize("present", [0, 30])
def test_a_hash_past_compact_max_shares_no_schema(present: int) -> None:
    """A hash of more than COMPACT_MAX fields is a BigHash: its field sets take no place
    among the SCHEMAS_MAX shared schemas, however many different ones are written
    (a table full of them would leave every new small field set a BigHash)."""
    limits = Limits()
    row = None
    if present:  # a row of 30 fields that five new names take past 32
        row = hashes.written(None, tuple(b"p%d" % i for i in range(present)),
                             (b"v",) * present, limits)
        assert type(row) is bytes
    shared = len(hashes._schemas)
    for k in range(5):
        names = tuple(b"wide%d-%d" % (k, i) for i in range(40 - present))
        big = hashes.written(row, names, (b"x",) * len(names), limits)
        assert isinstance(big, hashes.BigHash)
        assert hashes.length(big) == 40 and hashes.get(big, names[-1]) == b"x"
    assert len(hashes._schemas) == shared


@pytest.mark.parametrize("fields", range(12))
def test_a_row_of_any_number_of_fields_reads_back_what_was_written(fields: int) -> None:
    """A row is built from 1 + 2 pieces a field (a format of up to ten, a join past them):
    every count, written at once and then field by field over an existing row."""
    limits = Limits()
    pairs = [(b"f%d" % i, b"v" * i) for i in range(fields)]
    whole = hashes.written(None, tuple(n for n, _ in pairs), tuple(v for _, v in pairs), limits)
    assert list(hashes.items(whole)) == pairs
    for name, _ in pairs:
        whole = hashes.written(whole, (name,), (name + b"!",), limits)
    assert list(hashes.items(whole)) == [(name, name + b"!") for name, _ in pairs]
