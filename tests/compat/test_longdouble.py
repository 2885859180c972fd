"""emqd/compat/longdouble.py and the timeouts read with it: the rows are what Redis 7.0.15 answered
(HINCRBYFLOAT's replies, whether a BZPOPMIN waited, timed out or was refused); the
differential tests keep checking the same against a live redis-server."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emqd import errors
from emqd.commands.zset_pops import timeout_ms
from emqd.compat import longdouble
from emqd.errors import ReplyError


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_double_is_a_long_double(value: float) -> None:
    assert longdouble.rounded(Fraction(value)) == Fraction(value)


@given(st.fractions(), st.integers(-100, 100))
def test_a_rounded_value_has_a_64_bit_significand_and_is_the_nearest(value: Fraction,
                                                                    shift: int) -> None:
    value *= Fraction(2) ** shift
    result = longdouble.rounded(value)
    assert isinstance(result, Fraction)
    if value == 0:
        assert result == 0
        return
    # floor(log2) exactly (math.log2 of a Fraction goes through a float, which rounds
    # 2**64 - 46079 up to 2**64)
    magnitude = abs(result)
    log2 = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** log2 > magnitude:
        log2 -= 1
    exponent = log2 - 63
    significand = abs(result) / Fraction(2) ** exponent
    assert significand.denominator == 1 and significand < 2**64
    ulp = Fraction(2) ** exponent
    assert abs(result - value) <= ulp / 2  # no neighbour on the grid is nearer


def test_overflow_is_infinity_and_underflow_is_refused() -> None:
    assert longdouble.rounded(Fraction(2) ** 16384) == math.inf
    assert longdouble.rounded(-(Fraction(2) ** 16384)) == -math.inf
    assert longdouble.parse(b"1e4933") is None  # ERANGE: refused, as string2ld does
    assert longdouble.parse(b"1e-5000") is None
    assert longdouble.parse(b"0e-5000") == 0
    assert longdouble.parse(b"4e-4951") == Fraction(2) ** -16445  # the least subnormal


@pytest.mark.parametrize("text, expected", [
    (b"0.1", b"0.1"), (b"-0", b"0"), (b"1e17", b"100000000000000000"),
    (b"3.0000000000000004", b"3.0000000000000004"), (b"0x1.8p-1", b"0.75"), (b"5.", b"5"),
    (b"+.5", b"0.5"), (b"1e-20", b"0"), (b"-1e-20", b"0"), (b"1.5e3", b"1500"),
    (b"123456789012345678901234567890", b"123456789012345678899921813504"),
])
def test_human_text_is_ld2string_s(text: bytes, expected: bytes) -> None:
    value = longdouble.parse(text)
    assert value is not None
    assert longdouble.format_human(value) == expected


def test_sums_are_rounded_in_the_format() -> None:
    """0.1 + 0.2 is 0.3 in long double at 17 digits (a double would print ...04)."""
    total = longdouble.add(longdouble.parse(b"0.1"), longdouble.parse(b"0.2"))  # type: ignore[arg-type]
    assert longdouble.format_human(total) == b"0.3"
    assert math.isnan(longdouble.add(math.inf, -math.inf))  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    b"", b" 1", b"1 ", b"x", b"nan", b"1,5", b"0x", b"1e", b"1\x00", b"--1", b".", b"e5",
    b"1" * 5120, b"1_000",
])
def test_texts_redis_refuses(text: bytes) -> None:
    assert longdouble.parse(text) is None


def test_a_text_of_5000_digits_is_read_and_written() -> None:
    """int() refuses to print or read more than 4300 digits; a sum this long must not."""
    value = longdouble.parse(b"9" * 4000)
    assert value is not None
    assert len(longdouble.format_human(value)) == 4000


@pytest.mark.parametrize("text, ms", [
    (b"0", 0), (b"1", 1000), (b"0.5", 500), (b"0.0001", 1), (b"1e-400", 1),
    (b"-0.0001", 0), (b"-0.001", 0), (b"-0", 0), (b"-1e-400", 0), (b"0x10", 16000),
    (b"9223372036854775", 0),  # its deadline overflows: Redis waits for ever
])
def test_timeouts_in_seconds_round_up_to_milliseconds(text: bytes, ms: int) -> None:
    assert timeout_ms(text) == ms


@pytest.mark.parametrize("text, error", [
    (b"-0.0011", errors.TIMEOUT_NEGATIVE), (b"-1", errors.TIMEOUT_NEGATIVE),
    (b"inf", errors.TIMEOUT_NEGATIVE), (b"-inf", errors.TIMEOUT_NEGATIVE),
    (b"1e300", errors.TIMEOUT_NEGATIVE), (b"x", errors.TIMEOUT_NOT_FLOAT),
    (b"nan", errors.TIMEOUT_NOT_FLOAT), (b" 1", errors.TIMEOUT_NOT_FLOAT),
    (b"", errors.TIMEOUT_NOT_FLOAT),
])
def test_timeouts_redis_refuses(text: bytes, error: errors.Refusal) -> None:
    with pytest.raises(ReplyError) as raised:
        timeout_ms(text)
    assert raised.value == error
