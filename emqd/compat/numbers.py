"""Reading and writing numbers exactly as Redis 7.0 does.

Redis reads numbers in three different ways, and each command family picks
one; emqd mirrors each, because clients see the differences as error replies:

- `parse_int` is string2ll (every integer argument, HINCRBY's stored value):
  an optional `-`, digits with no leading zero (`0` itself is fine), no `+`,
  no spaces, within 64 bits.
- `parse_float` is getDoubleFromObject (ZADD / ZINCRBY scores): the whole
  argument must be one C `strtod` number with no leading space; NaN, overflow
  (`1e400`) and underflow to zero (`1e-400`) are refused; `inf`, `-infinity`,
  hex (`0x1p3`) and denormals are accepted.
- `parse_score_bound` is zslParseRange (ZRANGEBYSCORE, ZCOUNT, ...): an
  optional `(`, then bare `strtod`, which skips leading spaces, reads
  `1e400` as inf and the empty string as 0, and stops at a NUL byte.

`strtod` below is the C function's grammar over bytes, so all three agree with
Redis on every corner. `format_double` is Redis 7.0's reply text for a double
(`%.17g`, measured against the reference: `0.1` answers `0.10000000000000001`,
under RESP2 as a bulk string and under RESP3 as a `,` double);
`format_listpack_score` is the text ZSCAN shows for a small set's score.

`score_arg` turns a score into the value a plan's op carries. An op's float
must be written to the append-only file as `repr(value)`: Python guarantees
that repr round-trips every double exactly (`0.1`, `5e-324`, `1e+300`,
`-0.0`, `inf`), and Redis's strtod reads each of those texts back to the same
double, so replaying the file (by emqd or by Redis) rebuilds the same scores.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mypy_extensions import i64  # a native int once compiled; a plain int otherwise

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
UINT64_MAX: Final = 2**64 - 1
# The last millisecond a score (a double) holds exactly: a deadline beyond it would be
# answered as one number and stored as another, so every time a verb takes is refused
# past it (errors.invalid_time). The year 285,000.
MAX_TIME_MS: Final = 2**53
# Whether the core runs compiled by mypyc: setup.py builds its modules together, so
# this one's file (an extension module, or .py) says it for all of them. Read by
# the few places that take another way in each build, and by emqd.core_build().
COMPILED: Final = not __file__.endswith(".py")

_INT: Final = re.compile(rb"-?(?:0|[1-9][0-9]{0,19})\Z")

# C strtod's grammar (in the "C" locale), longest prefix first: hex, then
# decimal, then inf/nan. Each pattern is matched at the first non-space byte.
_C_SPACE: Final = b" \t\n\v\f\r"
_HEX: Final = re.compile(
    rb"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)"
)
_DECIMAL: Final = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL: Final = re.compile(
    rb"([+-]?)(?:(inf(?:inity)?)|nan(?:\([0-9A-Za-z_]*\))?)", re.IGNORECASE)
_NONZERO_HEX: Final = re.compile(rb"[1-9a-fA-F]")
_NONZERO_DEC: Final = re.compile(rb"[1-9]")


def parse_int(value: bytes) -> int | None:
    """The integer Redis reads in `value`, or None where string2ll refuses it.

    The common case is up to 18 ASCII digits with no leading zero (so within 64
    bits). Compiled, a loop over the bytes reads it in ~20 ns where int() costs
    ~110 (a job cycle reads six such numbers); interpreted, int() is the cheaper,
    so each build takes its own way to the same number (a property test checks
    both against the rule)."""
    size = len(value)
    if not COMPILED:
        if size < 19 and value.isdigit() and (value[0] != 48 or size == 1):
            return int(value)  # bytes.isdigit() is ASCII-only
        return _parse_int_slowly(value)
    if 0 < size < 19:
        number: i64 = value[0] - 48
        if 0 < number <= 9 or (number == 0 and size == 1):
            i: i64 = 1
            end: i64 = size
            while i < end:  # over i64s: a `range` loop boxed its index (~35 a digit)
                digit: i64 = value[i] - 48
                if digit < 0 or digit > 9:
                    return _parse_int_slowly(value)
                number = number * 10 + digit
                i += 1
            return number
    return _parse_int_slowly(value)


def _parse_int_slowly(value: bytes) -> int | None:
    """parse_int's other cases: a sign, 19 or 20 digits, or no integer at all."""
    if not _INT.match(value) or value == b"-0":
        return None
    number = int(value)
    if number > INT64_MAX or number < INT64_MIN:
        return None
    return number


def strtod(value: bytes) -> tuple[float, int, bool]:
    """C's strtod on `value`: (number, bytes consumed, ERANGE was set).

    Consumed is 0 when no number was found (strtod's `endptr == nptr`). The
    C string ends at the first NUL byte, which callers see as an unconsumed
    rest starting with b"\\0". ERANGE is reported for overflow to infinity and
    for a non-zero number that rounded to zero (the two cases Redis tests).
    """
    start = 0
    while start < len(value) and value[start] in _C_SPACE:
        start += 1
    match = _HEX.match(value, start)
    if match:
        mantissa = re.split(rb"[pP]", match.group(2), maxsplit=1)[0]
        try:
            number = float.fromhex(match.group(2).decode())
        except OverflowError:
            number = math.inf
        if match.group(1) == b"-":
            number = -number
        erange = math.isinf(number) or (number == 0 and bool(_NONZERO_HEX.search(mantissa)))
        return number, match.end(), erange
    match = _DECIMAL.match(value, start)
    if match:
        text = match.group()
        number = float(text)
        mantissa = re.split(rb"[eE]", text, maxsplit=1)[0]
        erange = math.isinf(number) or (number == 0 and bool(_NONZERO_DEC.search(mantissa)))
        return number, match.end(), erange
    match = _SPECIAL.match(value, start)
    if match:
        negative = match.group(1) == b"-"
        if match.group(2):
            return (-math.inf if negative else math.inf), match.end(), False
        return math.nan, match.end(), False
    return 0.0, 0, False


def parse_float(value: bytes) -> float | None:
    """The double getDoubleFromObject reads (scores), or None where Redis refuses it."""
    if not value or value[0] in _C_SPACE:
        return None
    number, consumed, erange = strtod(value)
    if consumed != len(value) or math.isnan(number):
        return None
    if erange and (math.isinf(number) or number == 0):
        return None
    return number


def parse_score_bound(value: bytes) -> tuple[float, bool] | None:
    """A ZRANGEBYSCORE bound as zslParseRange reads it: (number, exclusive), or None."""
    exclusive = value[:1] == b"("
    text = value[1:] if exclusive else value
    number, consumed, _ = strtod(text)
    rest = text[consumed:]
    if (rest and rest[0] != 0) or math.isnan(number):
        return None
    return number, exclusive


def parse_cursor(value: bytes) -> int | None:
    """A SCAN cursor as Redis reads it (strtoul, base 10), or None for `invalid cursor`.

    strtoul accepts `+5`, the empty string (0) and wraps a negative number
    modulo 2**64; a leading space, trailing garbage or more than 64 bits is refused.
    """
    if value[:1] and value[0] in _C_SPACE:
        return None
    end = value.find(b"\0")
    text = value if end < 0 else value[:end]
    match = re.fullmatch(rb"([+-]?)([0-9]*)", text)
    if match is None:
        return None
    sign, digits = match.groups()
    if not digits:
        return 0 if not sign else None
    number = int(digits)
    if number > UINT64_MAX:
        return None
    return (-number) % 2**64 if sign == b"-" else number


def format_double(value: float) -> bytes:
    """Redis 7.0's addReplyDouble text: `%.17g`, and `inf` / `-inf`."""
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    return b"%.17g" % value


def format_listpack_score(value: float) -> bytes:
    """The text of a score held in a listpack, as ZSCAN of a small set returns it.

    Redis 7.0 stores an integral score within +-2**62 as an integer
    (double2ll), so ZSCAN shows `100000000000000000` where ZSCORE shows
    `1e+17`; any other score is stored as `%.17g` text.
    """
    if -4611686018427387904.0 <= value <= 4611686018427387904.0 and value == int(value):
        return b"%d" % int(value)
    return format_double(value)


def score_arg(score: float) -> int | float:
    """The value a plan's ZADD op carries for `score`: an int when that is exact, else the float.

    Integral scores within 2**53 (every job-queue score: sequence numbers,
    priorities shifted by 2**40, millisecond times) log as plain integers;
    anything else, including -0.0 and the infinities, stays a float for the
    log to write as `repr` (see the module docstring).
    """
    if -9007199254740992.0 < score < 9007199254740992.0 and score == int(score):
        if score == 0 and math.copysign(1.0, score) < 0:
            return score
        return int(score)
    return score


_DECIMALS: Final = tuple(b"%d" % n for n in range(1024))


def decimal(n: int) -> bytes:
    """`b"%d" % n`, from a table for 0-1023 (a job's attempts, a lane's counts): the
    formatting cost ~200 instructions a number."""
    if 0 <= n < 1024:
        return _DECIMALS[n]
    return b"%d" % n


class _Recent:
    """The last two timestamps given to ms_text, and their text."""

    __slots__ = ("ms", "text", "older_ms", "older_text")

    def __init__(self) -> None:
        self.ms = self.older_ms = -1
        self.text = self.older_text = b""


_RECENT: Final = _Recent()


def ms_text(ms: int) -> bytes:
    """`b"%d" % ms` for a timestamp, remembered for the last two.

    The commands of one pipeline share the server's clock, and each writes a
    time or two (a CLAIM its `claimed_ms` and its lease's deadline, a COMPLETE
    its `finished_ms`): formatting each anew cost ~200 instructions. Only the
    last two values are remembered, so this is a pure function with a small memo.
    """
    recent = _RECENT
    if ms == recent.ms:
        return recent.text
    if ms == recent.older_ms:
        return recent.older_text
    text = b"%d" % ms
    recent.older_ms, recent.older_text = recent.ms, recent.text
    recent.ms, recent.text = ms, text
    return text
