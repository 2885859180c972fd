"""Redis's `long double` arithmetic, exactly: the x87 80-bit format of amd64 builds.

Two commands compute in it, and a client sees its every digit:

- HINCRBYFLOAT adds two long doubles (string2ld of the stored value and of the
  increment) and writes the sum with `%.17Lf`, trailing zeros cut
  (ld2string's LD_STR_HUMAN): `HINCRBYFLOAT h f 0.1` answers `0.1`, where a
  double would print `0.10000000000000001`.
- the blocking commands read their timeout in seconds as a long double and
  take `ceill(seconds * 1000)` milliseconds (timeout.c): `0.0001` is 1 ms,
  `-0.0001` is 0 (wait for ever), `-0.001` is 0 too (0.001 is a hair under in
  this format).

A long double here is a `Fraction` (exact) that `rounded` brought onto the
format's grid: a 64-bit significand, round half to even, subnormals down to
2**-16445, infinity from 2**16384. Python has no such float, and the C one is
out of reach without a dependency; the numbers involved are few and small, so
exact rationals cost nothing that matters. Infinities are `math.inf` floats.
The grammar accepted is C strtod's (`numbers.strtod` finds its extent).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Final

from emqd.compat.numbers import strtod

LongDouble = Fraction | float  # a Fraction on the grid, or +-math.inf
ZERO: Final = Fraction(0)

_SIGNIFICAND: Final = 64
_MIN_EXPONENT: Final = -16445  # the weight of the smallest subnormal's one bit
_OVERFLOW: Final = Fraction(2) ** 16384
MAX_CHARS: Final = 5 * 1024  # MAX_LONG_DOUBLE_CHARS: string2ld's buffer, ld2string's
# A decimal exponent past these is infinity or zero whatever the digits (a text is
# shorter than MAX_CHARS), so `10 ** exponent` is never built for them.
_TOO_BIG: Final = 4933 + MAX_CHARS
_TOO_SMALL: Final = -4951 - MAX_CHARS
_HEX: Final = re.compile(rb"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?[0-9]+))?")


def rounded(value: Fraction) -> LongDouble:
    """The long double nearest `value` (ties to even); +-inf past the largest."""
    if value == 0:
        return Fraction(0)
    magnitude = abs(value)
    # floor(log2(magnitude)), from the bit lengths, corrected by one comparison
    log2 = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** log2 > magnitude:
        log2 -= 1
    exponent = max(log2 - (_SIGNIFICAND - 1), _MIN_EXPONENT)
    scaled = magnitude / Fraction(2) ** exponent
    significand = round(scaled)  # Fraction.__round__ rounds half to even
    result = significand * Fraction(2) ** exponent
    if result >= _OVERFLOW:
        return math.inf if value > 0 else -math.inf
    return result if value > 0 else -result


def parse(text: bytes) -> LongDouble | None:
    """string2ld: the long double in all of `text`, or None where Redis refuses it
    (empty, too long, a leading space, anything after the number, NaN, overflow,
    or a non-zero number that underflows to zero)."""
    if not text or len(text) >= MAX_CHARS or text[0] in b" \t\n\v\f\r":
        return None
    _, consumed, _ = strtod(text)
    if consumed != len(text):
        return None
    lowered = text.lower().lstrip(b"+-")
    if lowered.startswith(b"nan"):
        return None
    if lowered.startswith(b"inf"):
        return -math.inf if text[:1] == b"-" else math.inf
    value = _exact(text)
    if value is None:
        return None
    result = rounded(value)
    if isinstance(result, float) or (result == 0 and value != 0):
        return None  # ERANGE: overflow, or underflow to zero
    return result


def _exact(text: bytes) -> Fraction | None:
    """The exact rational a decimal or hexadecimal C float text means; None when its
    exponent alone puts it past overflow (underflow comes out as a tiny exact 0).
    Decimal digits go through `Decimal`, which has no limit on their count (int()
    refuses more than 4300 digits, and a text may have 5119)."""
    hexa = _HEX.fullmatch(text)
    if hexa is not None:
        sign, whole, fraction, power = hexa.groups()
        digits = int((whole + (fraction or b"")) or b"0", 16)  # base 16: no digit limit
        exponent = int(power or b"0") - 4 * len(fraction or b"")
        if digits == 0 or exponent < 4 * _TOO_SMALL:
            return Fraction(0)
        if exponent > 4 * _TOO_BIG:
            return None
        value = digits * Fraction(2) ** exponent
        return -value if sign == b"-" else value
    try:
        number = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError):
        return None
    if number.is_zero() or number.adjusted() < _TOO_SMALL:
        return Fraction(0)
    if number.adjusted() > _TOO_BIG:
        return None
    return Fraction(number)


def add(a: LongDouble, b: LongDouble) -> LongDouble:
    """a + b in the format: exact, then rounded (inf + -inf is NaN, as in C)."""
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    return rounded(a + b)


def multiply(a: LongDouble, b: int) -> LongDouble:
    """a * b in the format (b an integer the format holds exactly, as C's 1000.0)."""
    if isinstance(a, float):
        return a * b
    return rounded(a * b)


def format_human(value: LongDouble) -> bytes:
    """ld2string(LD_STR_HUMAN): `%.17Lf` (correctly rounded, ties to even, as glibc
    prints), trailing zeros and a bare point cut, `-0` written `0`; `inf` / `-inf`.
    A text that would not fit Redis's buffer is empty, as ld2string leaves it."""
    if isinstance(value, float):
        return b"inf" if value > 0 else b"-inf"
    scaled = value * 10**17
    units = round(scaled)
    negative = value < 0
    digits = format(Decimal(abs(units)), "018f").encode()  # "%d" refuses 4300+ digits
    text = (b"-" if negative else b"") + digits[:-17] + b"." + digits[-17:]
    if len(text) + 1 > MAX_CHARS:
        return b""
    text = text.rstrip(b"0").rstrip(b".")
    return b"0" if text == b"-0" else text
