"""Plans as RESP commands: what the append-only file holds.

A record is one plan: a single command, or `MULTI`, its commands, `EXEC` when
the plan has more than one op, so Redis and emqd replay it atomically. A plan
built from a `Shape` (emqd/commit/plan.py) is formatted by its template in one step;
any other op by `append_command`. Values
are written so that they read back exactly: ints as decimals, floats as
`repr` (the shortest text that round-trips, which Redis's strtod parses, and
`inf` / `-inf`).

A big value costs about its size (issue 15): an argument of BIG_ARG bytes
or more goes into the record as itself, between its header and CRLF, and a
record holding one is returned as its list of parts, never joined, for the
log to write part by part (aof.py). A 200 MiB HSET is then logged from the
stored value, with no copy of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from emqd.commit.plan import BIG_VALUE, Plan

BIG_ARG: Final = BIG_VALUE  # bytes from which an argument is logged as itself (see above)
Record = bytes | list[bytes]  # one record, or the parts of one that holds a big argument

_MULTI: Final = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC: Final = b"*1\r\n$4\r\nEXEC\r\n"


def text(value: bytes | int | float) -> bytes:
    """An op's value as the bytes a replay reads back to the same value."""
    if type(value) is bytes:
        return value
    if type(value) is float:
        return repr(value).encode()
    return b"%d" % value  # type: ignore[str-format]


# Length headers encoded once: `b"$%d\r\n%b\r\n" % ...` per argument was the
# largest cost of logging a plan (every plan, under every fsync policy).
_BULK_HEADS: Final = tuple(b"$%d\r\n" % n for n in range(1024))
_ARRAY_HEADS: Final = tuple(b"*%d\r\n" % n for n in range(64))
_CRLF: Final = b"\r\n"


def append_command(op: Iterable[bytes | int | float], out: list[bytes],
                   counted: bool = False) -> bool:
    """Append one command's RESP multi-bulk encoding to `out`, in pieces; True when an
    argument of BIG_ARG bytes or more went in as itself (not to be joined: see above).

    `counted`: the command as one run of a script's arguments instead, its count as
    a bulk string before its arguments (the cluster sink's form: emqd/cluster/)."""
    args = [a if type(a) is bytes else text(a) for a in op]
    count = len(args)
    if counted:
        digits = b"%d" % count
        out.append(b"$%d\r\n%b\r\n" % (len(digits), digits))
    else:
        out.append(_ARRAY_HEADS[count] if count < 64 else b"*%d\r\n" % count)
    append = out.append
    big = False
    for arg in args:
        size = len(arg)
        if size < 1024:
            append(_BULK_HEADS[size])
            append(arg)
            append(_CRLF)
        elif size < BIG_ARG:
            append(b"$%d\r\n%b\r\n" % (size, arg))
        else:
            append(b"$%d\r\n" % size)
            append(arg)
            append(_CRLF)
            big = True
    return big


def _body(plan: Plan, out: list[bytes]) -> bool:
    """A plan's commands, without MULTI/EXEC: its Shape's template when it has one (the
    verbs give no Shape to a plan with a big value). True when a big argument is in."""
    shape = plan.shape
    if shape is not None:
        out.append(shape.body(plan.ops))
        return False
    big = False
    for op in plan.ops:
        big = append_command(op, out) or big
    return big


def record(plan: Plan) -> Record:
    """One plan's record: its command, or MULTI, its commands, EXEC."""
    shape = plan.shape
    if shape is not None:  # the hot verbs' plans: their template, in one step
        body: bytes = shape.body(plan.ops)
        return b"".join((_MULTI, body, _EXEC)) if len(plan.ops) > 1 else body
    out: list[bytes] = []
    if len(plan.ops) > 1:
        out.append(_MULTI)
        big = _body(plan, out)
        out.append(_EXEC)
    else:
        big = _body(plan, out)
    return out if big else b"".join(out)


def batch_record(plans: Iterable[Plan]) -> Record:
    """Several plans (an EXEC's) as one record; b"" when they hold no op."""
    plans = [plan for plan in plans if plan.ops]
    if not plans:
        return b""
    if len(plans) == 1:
        return record(plans[0])
    out = [_MULTI]
    big = False
    for plan in plans:
        big = _body(plan, out) or big
    out.append(_EXEC)
    return out if big else b"".join(out)


def joined(data: Record) -> bytes:
    """A record as one string (tests, tools: the log itself never joins a big one)."""
    return data if isinstance(data, bytes) else b"".join(data)


def runs(parts: Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """`parts` to write: each run of small ones joined (one write(2) for many records),
    each big one (BIG_ARG bytes or more: a value) as itself, never copied."""
    out: list[bytes | memoryview] = []
    small: list[bytes | memoryview] = []
    for part in parts:
        if len(part) < BIG_ARG:
            small.append(part)
            continue
        if small:
            out.append(b"".join(small))
            small = []
        out.append(part)
    if small:
        out.append(b"".join(small))
    return out
