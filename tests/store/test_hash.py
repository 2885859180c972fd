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
    assert type(one) is tuple and one[0] is two[0]  # type: ignore[index]
    one = hashes.written(one, (b"attempts", b"state"), (b"1", b"active"), Limits())
    assert hashes.as_dict(one) == {b"state": b"active", b"payload": b"p1", b"attempts": b"1"}
    assert list(hashes.names(one)) == [b"state", b"payload", b"attempts"]
    one = hashes.removed(one, [b"state", b"nope"])
    assert list(hashes.items(one)) == [(b"payload", b"p1"), (b"attempts", b"1")]  # type: ignore[arg-type]
    assert hashes.removed(one, [b"payload", b"attempts"]) is None  # type: ignore[arg-type]


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


def test_a_row_is_untracked_by_the_garbage_collector_after_its_first_collection() -> None:
    """A row holds its schema's mark (an int) and bytes, so the collector stops tracking it
    at its first collection: a million rows are not traversed by every later one."""
    limits = Limits()
    row = hashes.written(None, (b"state", b"payload"), (b"pending", b"x" * 100), limits)
    row = hashes.written(row, (b"state",), (b"active",), limits)  # the copying path too
    assert type(row[0]) is int
    gc.collect()
    assert not gc.is_tracked(row)
    assert hashes.as_dict(row) == {b"state": b"active", b"payload": b"x" * 100}


def test_a_row_of_an_unshared_schema_holds_the_schema_itself() -> None:
    """Past SCHEMAS_MAX a new schema is not shared and has no mark of the table's: its rows
    hold it, and read and write as any other row."""
    unshared = hashes.Schema((b"a", b"b"), True)
    row = (unshared, b"1", b"2")
    assert hashes.schema(row) is unshared and hashes.get(row, b"b") == b"2"
    assert hashes.as_dict(hashes.written(row, (b"a",), (b"9",), Limits())) == \
        {b"a": b"9", b"b": b"2"}
    assert hashes.removed(row, [b"a"]) == (hashes.schema_of((b"b",), True).mark, b"2")
