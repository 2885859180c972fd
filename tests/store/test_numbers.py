"""numbers.py, table-driven: each row is what Redis 7.0.15 answered for that text.

The rows were measured on the reference (ZADD for scores, ZRANGEBYSCORE for
bounds, HSCAN for cursors, HINCRBY for integers); the differential suite
keeps checking the same corners against a live redis-server.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emqd.compat.numbers import (
    format_double,
    format_listpack_score,
    parse_cursor,
    parse_float,
    parse_int,
    parse_score_bound,
    score_arg,
    strtod,
)

INF = math.inf


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"0", 0),
        (b"-1", -1),
        (b"9223372036854775807", 2**63 - 1),
        (b"-9223372036854775808", -(2**63)),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"-0", None),
        (b"", None),
        (b"-", None),
        (b"1.0", None),
        (b"1e3", None),
        (b"0x10", None),
        (b"\x001", None),
        (b"1\x00", None),
        ("\u0661".encode(), None),
    ],
)
def test_parse_int_is_string2ll(text: bytes, expected: int | None) -> None:
    assert parse_int(text) == expected


def _string2ll(text: bytes) -> int | None:
    """string2ll's rule as the table above shows it, written plainly: an optional `-`,
    then `0` alone or digits without a leading zero, within 64 bits."""
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or not all(48 <= c <= 57 for c in digits) or text == b"-0":
        return None
    if digits[0] == 48 and len(digits) > 1:
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@given(st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64).map(lambda n: b"%d" % n),
    st.lists(st.sampled_from(b"-0123456789 +x"), max_size=22).map(bytes),
))
def test_parse_int_agrees_with_string2ll_on_any_digits(text: bytes) -> None:
    # The compiled core reads short numbers with a loop of its own and the pure
    # one with int() (numbers.parse_int): each build runs this against the rule.
    assert parse_int(text) == _string2ll(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"1", 1.0),
        (b"-2.5", -2.5),
        (b".5", 0.5),
        (b"5.", 5.0),
        (b"+2", 2.0),
        (b"1E2", 100.0),
        (b"0x10", 16.0),
        (b"0x1p3", 8.0),
        (b"0X.8", 0.5),
        (b"inf", INF),
        (b"+inf", INF),
        (b"-Infinity", -INF),
        (b"INF", INF),
        (b"5e-324", 5e-324),
        (b"1e-310", 1e-310),
        (b"0e-400", 0.0),
        (b"1.23456789012345678", 1.2345678901234568),
        # refused: NaN, overflow, underflow to zero, spaces, trailing bytes, Python-only forms
        (b"nan", None),
        (b"-nan", None),
        (b"nan(1)", None),
        (b"1e400", None),
        (b"-1e400", None),
        (b"1e-400", None),
        (b"0x1p-2000", None),
        (b" 1", None),
        (b"1 ", None),
        (b"", None),
        (b"1_0", None),
        (b"1e", None),
        (b"1e+", None),
        (b"0x", None),
        (b"infinit", None),
        (b"1\x00", None),
        (b"(1", None),
        ("\u0661".encode(), None),
    ],
)
def test_parse_float_is_get_double_from_object(text: bytes, expected: float | None) -> None:
    assert parse_float(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"1", (1.0, False)),
        (b"(1", (1.0, True)),
        (b"-inf", (-INF, False)),
        (b"(+inf", (INF, True)),
        # bare strtod: leading spaces, overflow to inf, the empty string as 0, a NUL ends it
        (b" 1", (1.0, False)),
        (b"1e400", (INF, False)),
        (b"1e-400", (0.0, False)),
        (b"", (0.0, False)),
        (b"(", (0.0, True)),
        (b"1\x00x", (1.0, False)),
        (b"\x00", (0.0, False)),
        (b"0x2", (2.0, False)),
        (b"1 ", None),
        (b"nan", None),
        (b"(nan", None),
        (b"[1", None),
        (b"((1", None),
        (b" ", None),
        (b"abc", None),
    ],
)
def test_parse_score_bound_is_zsl_parse_range(text: bytes, expected: tuple | None) -> None:
    assert parse_score_bound(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"0", 0),
        (b"17", 17),
        (b"", 0),
        (b"+3", 3),
        (b"-1", 2**64 - 1),
        (b"-0", 0),
        (b"18446744073709551615", 2**64 - 1),
        (b"5\x00x", 5),
        (b"18446744073709551616", None),
        (b" 1", None),
        (b"1 ", None),
        (b"+", None),
        (b"-", None),
        (b"0x1", None),
        (b"abc", None),
    ],
)
def test_parse_cursor_is_strtoul(text: bytes, expected: int | None) -> None:
    assert parse_cursor(text) == expected


def test_strtod_reports_what_it_consumed() -> None:
    assert strtod(b"  12abc") == (12.0, 4, False)
    assert strtod(b"abc") == (0.0, 0, False)
    assert strtod(b"0xg") == (0.0, 1, False)  # "0" parsed, the x left over, as C does
    assert strtod(b"1e400")[2] is True and strtod(b"1e-400")[2] is True
    assert math.isnan(strtod(b"nan(abc)")[0]) and strtod(b"nan(abc)")[1] == 8


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, b"1"),
        (1.5, b"1.5"),
        (0.1, b"0.10000000000000001"),
        (-0.0, b"-0"),
        (1e300, b"1.0000000000000001e+300"),
        (INF, b"inf"),
        (-INF, b"-inf"),
        (1e17, b"1e+17"),
        (5e-324, b"4.9406564584124654e-324"),
        (1e-5, b"1.0000000000000001e-05"),
        (123456789012345678.0, b"1.2345678901234568e+17"),
    ],
)
def test_format_double_is_redis_7_0(value: float, text: bytes) -> None:
    assert format_double(value) == text


@pytest.mark.parametrize(
    "value, text",
    [
        (1e17, b"100000000000000000"),
        (-3.0, b"-3"),
        (-0.0, b"0"),
        (2.0**62, b"4611686018427387904"),
        (2.0**63, b"9.2233720368547758e+18"),
        (1.5, b"1.5"),
        (INF, b"inf"),
    ],
)
def test_format_listpack_score(value: float, text: bytes) -> None:
    assert format_listpack_score(value) == text


@pytest.mark.parametrize(
    "score, expected",
    [
        (3.0, 3),
        (-7.0, -7),
        (2.0**52, 2**52),
        (1.5, 1.5),
        (2.0**53, 2.0**53),
        (INF, INF),
        (1e300, 1e300),
    ],
)
def test_score_arg_is_int_only_when_exact(score: float, expected: int | float) -> None:
    result = score_arg(score)
    assert result == expected and type(result) is type(expected)


def test_score_arg_keeps_negative_zero() -> None:
    result = score_arg(-0.0)
    assert type(result) is float and math.copysign(1.0, result) < 0


@pytest.mark.parametrize("score", [0.1, 5e-324, 1e300, -0.0, INF, -INF, 2.0**53 + 2, 1 / 3])
def test_a_float_op_written_as_repr_reads_back_exactly(score: float) -> None:
    """The log writes a float op as repr; Redis's own reader (parse_float) must get it back."""
    arg = score_arg(score)
    text = repr(arg).encode() if type(arg) is float else b"%d" % arg
    back = parse_float(text)
    assert back == score and math.copysign(1.0, back) == math.copysign(1.0, score)


@given(st.lists(st.one_of(st.integers(-5, 2_000), st.integers(-(2**63), 2**63)), max_size=40))
def test_decimal_and_ms_text_write_what_formatting_writes(numbers: list[int]) -> None:
    """From the table, from the memo of the last two times (asked in any order, some
    twice in a row, as a CLAIM asks its time and its deadline), or formatted afresh:
    the same text as `b"%d" % n` every time."""
    from emqd.compat.numbers import decimal, ms_text

    for n in numbers + numbers[::-1] + numbers:
        assert decimal(n) == b"%d" % n
        assert ms_text(n) == b"%d" % n
        assert ms_text(n + 30_000) == b"%d" % (n + 30_000)
        assert ms_text(n) == b"%d" % n
