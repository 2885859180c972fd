"""Reading and writing numbers exactly as Redis does.

`parse_int` is Redis's string2ll: an optional `-`, digits with no leading zero
(`0` itself is fine), no `+`, no spaces, within 64 bits. `parse_float` is
Redis's string-to-double for scores. `format_double` is Redis 7.0's `%.17g`.
"""

from __future__ import annotations

import math
import re

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,19})\Z")


def parse_int(value: bytes) -> int | None:
    """The integer Redis reads in `value`, or None where string2ll refuses it."""
    if not _INT.match(value) or value == b"-0":
        return None
    number = int(value)
    if number > INT64_MAX or number < INT64_MIN:
        return None
    return number


def parse_float(value: bytes) -> float | None:
    """The double Redis reads (strtod: no trailing garbage, no spaces, no NaN)."""
    if not value or value[0] in b" \t\n\r\v\f" or value[-1] in b" \t\n\r\v\f":
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if math.isnan(number):
        return None
    if b"_" in value:  # Python accepts 1_000; strtod does not
        return None
    return number


def format_double(value: float) -> bytes:
    """Redis 7.0's addReplyDouble text: `%.17g`, and `inf` / `-inf`."""
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    return b"%.17g" % value
