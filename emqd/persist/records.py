"""Plans as RESP commands: what the append-only file holds.

A record is one plan: a single command, or `MULTI`, its commands, `EXEC` when
the plan has more than one op, so Redis and emqd replay it atomically. Values
are written so that they read back exactly: ints as decimals, floats as
`repr` (the shortest text that round-trips, which Redis's strtod parses, and
`inf` / `-inf`).
"""

from __future__ import annotations

from collections.abc import Iterable

from emqd.plan import Op

_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"


def text(value: bytes | int | float) -> bytes:
    """An op's value as the bytes a replay reads back to the same value."""
    if type(value) is bytes:
        return value
    if type(value) is float:
        return repr(value).encode()
    if isinstance(value, int):
        return b"%d" % value
    return bytes(value)


# Length headers encoded once: `b"$%d\r\n%b\r\n" % ...` per argument was the
# largest cost of logging a plan (every plan, under every fsync policy).
_BULK_HEADS = tuple(b"$%d\r\n" % n for n in range(1024))
_ARRAY_HEADS = tuple(b"*%d\r\n" % n for n in range(64))
_CRLF = b"\r\n"


def append_command(args: Iterable[bytes | int | float], out: list[bytes]) -> None:
    """Append one command's RESP multi-bulk encoding to `out`, in pieces."""
    args = [a if type(a) is bytes else text(a) for a in args]
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


def append_record(ops: list[Op], out: list[bytes]) -> None:
    """Append one plan's record to `out` (wrapped in MULTI/EXEC when it has several ops)."""
    if len(ops) == 1:
        append_command(ops[0], out)
        return
    out.append(_MULTI)
    for op in ops:
        append_command(op, out)
    out.append(_EXEC)


def encode_records(records: Iterable[list[Op]]) -> bytes:
    """Several plans' records as one string, ready for one write(2)."""
    out: list[bytes] = []
    for ops in records:
        append_record(ops, out)
    return b"".join(out)
