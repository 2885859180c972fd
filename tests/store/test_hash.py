"""store/hash.py: HINCRBY's reading of a stored value, and the listpack test HSCAN uses."""

from __future__ import annotations

import pytest

from emqd.errors import HASH_NOT_INTEGER, OVERFLOW, Refusal, ReplyError
from emqd.store.hash import LISTPACK_ENTRIES, LISTPACK_VALUE, incremented, is_compact


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


@pytest.mark.parametrize(
    "row, compact",
    [
        ({}, True),
        ({b"f": b"v" * LISTPACK_VALUE}, True),
        ({b"f": b"v" * (LISTPACK_VALUE + 1)}, False),
        ({b"f" * (LISTPACK_VALUE + 1): b"v"}, False),
        ({b"%d" % i: b"" for i in range(LISTPACK_ENTRIES)}, True),
        ({b"%d" % i: b"" for i in range(LISTPACK_ENTRIES + 1)}, False),
    ],
)
def test_is_compact(row: dict, compact: bool) -> None:
    assert is_compact(row) is compact
