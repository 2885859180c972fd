"""Plans as RESP commands: what the append-only file holds.

A record is one plan: a single command, or `MULTI`, its commands, `EXEC` when
the plan has more than one op, so Redis and emqd replay it atomically. A plan
built from a `Shape` (emqd/plan.py) is formatted by its template in one step;
any other op by `append_command`. Values
are written so that they read back exactly: ints as decimals, floats as
`repr` (the shortest text that round-trips, which Redis's strtod parses, and
`inf` / `-inf`).
"""

from __future__ import annotations

from collections.abc import Iterable

from emqd.plan import Op, Plan

_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"


def text(value: bytes | int | float) -> bytes:
    """An op's value as the bytes a replay reads back to the same value."""
    if type(value) is bytes:
        return value
    if type(value) is float:
        return repr(value).encode()
    return b"%d" % value  # type: ignore[str-format]


# Length headers encoded once: `b"$%d\r\n%b\r\n" % ...` per argument was the
# largest cost of logging a plan (every plan, under every fsync policy).
_BULK_HEADS = tuple(b"$%d\r\n" % n for n in range(1024))
_ARRAY_HEADS = tuple(b"*%d\r\n" % n for n in range(64))
_CRLF = b"\r\n"


def append_command(op: Iterable[bytes | int | float], out: list[bytes]) -> None:
    """Append one command's RESP multi-bulk encoding to `out`, in pieces."""
    args = [a if type(a) is bytes else text(a) for a in op]
    count = len(args)
    out.append(_ARRAY_HEADS[count] if count < 64 else b"*%d\r\n" % count)
    append = out.append
    for arg in args:
        size = len(arg)
        if size < 1024:
            append(_BULK_HEADS[size])
            append(arg)
            append(_CRLF)
        else:
            append(b"$%d\r\n%b\r\n" % (size, arg))


def _body(plan: Plan, out: list[bytes]) -> None:
    """A plan's commands, without MULTI/EXEC: its Shape's template when it has one."""
    shape = plan.shape
    if shape is not None:
        out.append(shape.body(plan.ops))
        return
    for op in plan.ops:
        append_command(op, out)


def record(plan: Plan) -> bytes:
    """One plan's record: its command, or MULTI, its commands, EXEC."""
    out: list[bytes] = []
    if len(plan.ops) > 1:
        out.append(_MULTI)
        _body(plan, out)
        out.append(_EXEC)
    else:
        _body(plan, out)
    return b"".join(out)


def batch_record(plans: Iterable[Plan]) -> bytes:
    """Several plans (an EXEC's) as one record; b"" when they hold no op."""
    plans = [plan for plan in plans if plan.ops]
    if not plans:
        return b""
    if len(plans) == 1:
        return record(plans[0])
    out = [_MULTI]
    for plan in plans:
        _body(plan, out)
    out.append(_EXEC)
    return b"".join(out)


def encode_records(records: Iterable[list[Op]]) -> bytes:
    """Plans given as their ops (tests, tools), each as its record, in one string."""
    return b"".join(record(Plan(ops)) for ops in records)
