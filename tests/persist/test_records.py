"""Plans as RESP records: the exact bytes, and values that read back unchanged."""

from __future__ import annotations

import math

import hiredis
import pytest

from emqd.persist.records import text
from tests.persist.helpers import encode_records


def parse_all(data: bytes) -> list:
    reader = hiredis.Reader()
    reader.feed(data)
    out = []
    while (item := reader.gets()) is not False:
        out.append(item)
    return out


def test_a_one_op_plan_is_one_command() -> None:
    assert encode_records([[(b"HSET", b"k", b"f", b"v")]]) == (
        b"*4\r\n$4\r\nHSET\r\n$1\r\nk\r\n$1\r\nf\r\n$1\r\nv\r\n"
    )


def test_a_plan_of_several_ops_is_wrapped_in_multi_exec() -> None:
    data = encode_records([[(b"DEL", b"a"), (b"ZADD", b"z", 3, b"m")], [(b"FLUSHALL",)]])
    assert parse_all(data) == [
        [b"MULTI"], [b"DEL", b"a"], [b"ZADD", b"z", b"3", b"m"], [b"EXEC"], [b"FLUSHALL"],
    ]


@pytest.mark.parametrize("value", [0.1, 1 / 3, -2.5e-308, 2.0**53 + 2, 1e300, 5e-324, -0.0,
                                   7.0, 123456789.123456789])
def test_floats_read_back_exactly(value: float) -> None:
    assert float(text(value)) == value
    assert math.copysign(1, float(text(value))) == math.copysign(1, value)


def test_infinities_are_written_as_redis_reads_them() -> None:
    assert text(math.inf) == b"inf"
    assert text(-math.inf) == b"-inf"


def test_ints_are_decimals_and_bytes_stay_bytes() -> None:
    assert text(-(2**63)) == b"-9223372036854775808"
    assert text(b"\x00\r\n") == b"\x00\r\n"
