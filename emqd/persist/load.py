"""Reading the append-only file back into the keyspace at start-up.

The fast path feeds the file to `hiredis.Reader` in slices of about 16 KiB
(a bigger feed makes hiredis move its buffer over and over) and applies each
slice's ops to the keyspace in one `Keyspace.apply` call, with the cyclic
garbage collector paused: the millions of small objects a big file makes are
not garbage, and scanning them would cost more than the parse.

Offsets are not tracked per command, which would cost as much as the parse.
Instead, slices end just before a MULTI (or any `*` that follows a CRLF), so
most of them end on a record boundary; a slice after which the reader holds
no byte and no MULTI is open is an *anchor*, a known clean offset (the next
byte is a `*`, and inside a command the next element would start with `$`).
hiredis does not check the CRLF after a bulk string (it skips two bytes), so
the records between two anchors are checked there (`_framing_intact`), by
counting at C speed, with no Python per argument: intact framing holds exactly
one CRLF per header line and one per bulk string, plus the arguments' own. When
no argument ends in CR, a damaged terminator cannot be made up for by any other
CRLF, so the count is exact; when one does, the records are scanned strictly.

The strict Python scan (`_commands`) reads only from the last anchor: it
checks the last records, and when something is wrong (framing, an unknown
command, EOF inside a record or a MULTI) it finds the exact offset and decides:

- the bytes after the last complete record are a prefix of a record, or an
  unterminated MULTI block: a *torn tail* (a crash mid-write). It was not
  applied; `Loaded.torn_bytes` says how much to cut, and the caller truncates
  the file only after the whole load succeeded;
- anything else is damage: `LoadError` names the byte offset where it starts
  and the start of the record that holds it (where a cut keeps every complete
  record before), and nothing on disk is changed.

A bulk length that reaches past the end of the file is a torn tail only when no
complete record follows it: a crash mid-write leaves a prefix of one record, so
a complete op after the length means the length itself is damaged (a length
made bigger swallows the records after it, which a cut would drop). A length
over proto-max-bulk-len (512 MiB, the most any request, so any record, holds)
is damage wherever it is.

An op that the keyspace refuses (a hash write to a sorted set, a score that is
not a number) is damage too; it is found by replaying the file record by record
into a scratch keyspace, which only happens when the start fails anyway.
"""

from __future__ import annotations

import gc
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, cast

import hiredis

from emqd.store.keyspace import Keyspace

SLICE_BYTES = 16 * 1024
# Redis's proto-max-bulk-len, as the request reader has it (wire/resp.py MAX_BULK, which
# persist/ may not import): no request, so no record, holds a longer bulk string.
MAX_BULK = 512 * 1024 * 1024
_MULTI = b"MULTI"
_EXEC = b"EXEC"
_RECORD_START = b"\r\n*1\r\n$5\r\nMULTI\r\n"

# name -> (fewest args, most args, total count must be even): the op set of
# store/keyspace.py, in the forms the file holds them.
_SPECS: dict[bytes, tuple[int, int, bool]] = {
    b"HSET": (4, 1 << 62, True),
    b"HDEL": (3, 1 << 62, False),
    b"HINCRBY": (4, 4, False),
    b"DEL": (2, 1 << 62, False),
    b"ZADD": (4, 1 << 62, True),
    b"ZREM": (3, 1 << 62, False),
    b"FLUSHALL": (1, 1, False),
}


class LoadError(Exception):
    """The file is damaged before its last record; the server must not start.

    `offset` is the first byte no valid file could hold there; `record` the start
    of the record that holds it (a MULTI's, inside one): a cut there keeps every
    complete record before the damage (`emqd --check-aof` says what it drops).
    """

    def __init__(self, path: str, offset: int, reason: str, record: int | None = None) -> None:
        record = offset if record is None else record
        super().__init__(
            f"{path}: damaged at byte offset {offset}: {reason} (in the record at byte offset "
            f"{record}); the file was left untouched: `emqd --check-aof {path}` says what a cut "
            f"at byte offset {record} would drop, and `emqd --check-aof {path} --fix` cuts it "
            "there after keeping a copy"
        )
        self.path = path
        self.offset = offset
        self.reason = reason
        self.record = record


@dataclass(frozen=True, slots=True)
class Loaded:
    """What `load` found: the length of the valid records, and of a torn tail after them."""

    size: int  # bytes of complete records: the file's length once the tail is cut
    torn_bytes: int  # bytes of the torn last record (0 when the file ends cleanly)


class _Problem(Exception):
    """The fast path met something it does not handle; the strict scan decides."""


def load(path: str, keyspace: Keyspace) -> Loaded:
    """Replay `path` into `keyspace`. A missing or empty file loads nothing.

    Raises `LoadError` for damage; never writes to the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return Loaded(0, 0)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return Loaded(0, 0)
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as buf:
            gc_was_on = gc.isenabled()
            gc.disable()
            try:
                return _load(path, buf, size, keyspace)
            finally:
                if gc_was_on:
                    gc.enable()
    finally:
        os.close(fd)


def _load(path: str, buf: mmap.mmap, size: int, keyspace: Keyspace) -> Loaded:
    reader = hiredis.Reader()
    feed, gets, has_data = reader.feed, reader.gets, reader.has_data
    apply = keyspace.apply
    specs = _SPECS
    txn: list[Any] | None = None  # ops of an open MULTI, applied at its EXEC
    anchor = 0
    start = 0
    checked = 0  # the framing before this offset was checked
    unchecked: list[list[Any]] = []  # the ops lists of the slices read since `checked`
    records = 0  # MULTI ... EXEC records read since `checked`
    try:
        while start < size:
            end = _slice_end(buf, start + SLICE_BYTES)
            end = size if end < 0 else end + 2
            feed(cast(bytes, buf), start, end - start)  # hiredis reads any buffer
            ops: list[Any] = []
            while (cmd := gets()) is not False:
                spec = specs.get(cmd[0])
                if spec is not None:
                    n = len(cmd)
                    if n < spec[0] or n > spec[1] or (spec[2] and n & 1):
                        raise _Problem
                    if txn is None:
                        ops.append(cmd)
                    else:
                        txn.append(cmd)
                elif cmd == [_MULTI] and txn is None:
                    txn = []
                elif cmd == [_EXEC] and txn is not None:
                    ops.extend(txn)
                    txn = None
                    records += 1
                else:
                    raise _Problem
            unchecked.append(ops)
            # The reader has used every byte and the next one is a `*`: within a
            # command the next element would be a `$`, so this is a boundary,
            # where the framing read since the last one is checked. (The end of
            # the file is left to the strict scan of the tail.)
            boundary = txn is None and not has_data() and end < size
            if boundary:
                _check_framing(path, buf, checked, end, unchecked, records)
                checked, unchecked, records = end, [], 0
            _apply_slice(path, buf, size, apply, ops)
            start = end
            if boundary:
                anchor = end
    except (_Problem, hiredis.ProtocolError, TypeError, IndexError) as problem:
        torn_at = _scan_tail(path, buf, anchor, size)  # raises at the damage it finds
        if torn_at < size:  # what the strict scan took for a torn tail, hiredis could not read
            said = f" ({problem})" if str(problem) else ""
            raise LoadError(path, torn_at, f"a record that cannot be read{said}") from None
        raise LoadError(path, anchor, "unreadable records after this offset") from None
    # The strict scan of the last records: it checks what hiredis does not
    # (a bulk string's CRLF) and finds where a torn tail starts.
    torn_at = _scan_tail(path, buf, anchor, size)
    if torn_at == size and txn is not None:
        raise LoadError(path, anchor, "unreadable records after this offset")
    return Loaded(torn_at, size - torn_at)


def _slice_end(buf: mmap.mmap, after: int) -> int:
    """Where a CRLF before the next record most likely is, after `after` (-1: none).

    A MULTI is the surest record start; any command start will do when there
    is none near (files of one-op plans).
    """
    end = buf.find(_RECORD_START, after, after + 4 * SLICE_BYTES)
    return end if end >= 0 else buf.find(b"\r\n*", after)


def _check_framing(path: str, buf: mmap.mmap, start: int, end: int, slices: list[list[Any]],
                   records: int) -> None:
    """Raise _Problem (or LoadError) unless every bulk string of buf[start:end] ends in CRLF.

    buf[start:end] holds exactly the ops of `slices` and `records` MULTI/EXEC pairs.
    """
    intact = _framing_intact(buf[start:end], slices, records)
    if intact is None:  # the counts cannot tell: read these records strictly
        torn_at = _scan_tail(path, buf, start, end)  # raises at the damage it finds
        if torn_at < end:  # hiredis read it whole: its length lines disagree
            raise LoadError(path, torn_at, "a record cut short")
    elif not intact:
        raise _Problem


def _framing_intact(data: bytes, slices: list[list[Any]], records: int) -> bool | None:
    """Whether `data`, which hiredis read as the ops of `slices` and `records` MULTI/EXEC
    pairs, has CRLF after every bulk string. None: the counts cannot tell.

    Every header line ends in CRLF (hiredis finds its end there) and every
    bulk string's two following bytes are its terminator, so intact framing
    holds one CRLF per command and two per argument (three per MULTI and per
    EXEC), plus the arguments' own. A damaged terminator loses its CRLF; the
    only other CRLF it can make is with a CR that ends an argument (the byte
    after it is a type byte, never an LF). So when no argument ends in CR the
    count is exact, and the common case (no CR in any argument) costs a join
    and two C-speed counts.
    """
    framing = sum(map(len, slices)) + 2 * sum(map(len, chain.from_iterable(slices))) + 6 * records
    found = data.count(b"\r\n")
    if b"\r" not in b"".join(map(b"".join, chain.from_iterable(slices))):
        return found == framing
    args = list(chain.from_iterable(chain.from_iterable(slices)))
    if any(map(bytes.endswith, args, repeat(b"\r"))):
        return None
    return found == framing + sum(map(bytes.count, args, repeat(b"\r\n")))


def _apply_slice(path: str, buf: mmap.mmap, size: int, apply, ops: list[Any]) -> None:  # type: ignore[no-untyped-def]
    try:
        apply(ops)
    except Exception:
        offset, reason = _replay_for_error(buf, size)
        raise LoadError(path, offset, reason) from None


def _scan_tail(path: str, buf: mmap.mmap, anchor: int, size: int) -> int:
    """The offset where a torn tail starts (everything from `anchor` scanned strictly).

    `anchor` is a record boundary. Raises LoadError at damage, naming the record
    that holds it.
    """
    txn_at: int | None = None
    try:
        for offset, cmd in _commands(buf, anchor, size):
            if cmd == [_MULTI]:
                if txn_at is not None:
                    raise LoadError(path, offset, "MULTI inside MULTI", txn_at)
                txn_at = offset
            elif cmd == [_EXEC]:
                if txn_at is None:
                    raise LoadError(path, offset, "EXEC without MULTI")
                txn_at = None
            else:
                problem = _problem(cmd)
                if problem is not None:
                    raise LoadError(path, offset, problem, txn_at)
    except _Torn as torn:
        record = torn.offset if txn_at is None else txn_at
        if torn.length_at is not None:
            follows = _complete_op_after(buf, torn.offset + 1, size)
            if follows is not None:
                raise LoadError(
                    path, torn.length_at,
                    f"a bulk length that reaches past the end of the file, with a complete "
                    f"command at byte offset {follows} after it", record) from None
        return record
    except _Damage as damage:
        record = damage.command if txn_at is None else txn_at
        raise LoadError(path, damage.offset, damage.reason, record) from None
    if txn_at is not None:
        return txn_at  # MULTI ... and no EXEC: the crash came before it
    return size


def _problem(cmd: list[bytes]) -> str | None:
    """Why `cmd` cannot be an op of the file (None: it can)."""
    spec = _SPECS.get(cmd[0])
    if spec is None:
        return f"unknown command {cmd[0][:64]!r}"
    n = len(cmd)
    if n < spec[0] or n > spec[1] or (spec[2] and n & 1):
        return f"wrong number of arguments for {cmd[0].decode()}"
    return None


def _complete_op_after(buf: mmap.mmap, pos: int, end: int, or_multi: bool = False) -> int | None:
    """The offset of the first complete op (HSET, ZADD, ... as the file holds them; with
    `or_multi` a MULTI too) that starts after a CRLF at or after `pos`, or None.

    A torn tail is a prefix of one record, so nothing complete follows its torn
    command, but for a value that itself holds a whole op as RESP.
    """
    while (found := buf.find(b"\r\n*", pos, end)) >= 0:
        pos = found + 2
        try:
            for _, cmd in _commands(buf, pos, end):
                if _problem(cmd) is None or (or_multi and cmd == [_MULTI]):
                    return pos
                break
        except (_Torn, _Damage):
            pass
    return None


def _replay_for_error(buf: mmap.mmap, size: int) -> tuple[int, str]:
    """Replay record by record into a scratch keyspace to find the op that fails."""
    scratch = Keyspace()
    txn: list[Any] | None = None
    txn_at = 0
    try:
        for offset, cmd in _commands(buf, 0, size):
            if cmd == [_MULTI]:
                txn, txn_at = [], offset
                continue
            if txn is not None and cmd != [_EXEC]:
                txn.append(cmd)
                continue
            record, record_at = ([cmd], offset) if txn is None else (txn, txn_at)
            txn = None
            try:
                scratch.apply(record)
            except Exception as exc:
                return record_at, f"the keyspace refused it ({type(exc).__name__}: {exc})"
    except (_Torn, _Damage):
        pass
    return 0, "the keyspace refused a command"


class _Torn(Exception):
    """The command at `offset` is cut short by the end; `length_at`: the digits of the bulk
    length that reaches past it, when that is why."""

    def __init__(self, offset: int, length_at: int | None = None) -> None:
        self.offset = offset
        self.length_at = length_at


class _Damage(Exception):
    """Damage at `offset`, in the command that starts at `command`."""

    def __init__(self, offset: int, reason: str, command: int) -> None:
        self.offset = offset
        self.reason = reason
        self.command = command


def _commands(buf: mmap.mmap, pos: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """Strictly parse RESP commands from `pos`: (offset, argv) for each.

    Raises `_Torn` at a command cut short by the end of the file, `_Damage`
    at the first byte that no valid file could hold there.
    """
    while pos < end:
        start = pos
        if buf[pos] != 42:  # b"*"
            raise _Damage(pos, f"expected '*', found {bytes(buf[pos:pos + 16])!r}", start)
        count, pos = _number(buf, start, pos + 1, end, minimum=1)
        args: list[bytes] = []
        for _ in range(count):
            if pos >= end:
                raise _Torn(start)
            if buf[pos] != 36:  # b"$"
                raise _Damage(pos, f"expected '$', found {bytes(buf[pos:pos + 16])!r}", start)
            length_at = pos + 1
            length, pos = _number(buf, start, length_at, end, minimum=0)
            if length > MAX_BULK:
                raise _Damage(length_at, f"bulk length {length} is more than any record holds "
                              f"(proto-max-bulk-len {MAX_BULK})", start)
            if pos + length + 2 > end:
                tail = bytes(buf[pos + length : end])
                if tail and not b"\r\n".startswith(tail):
                    raise _Damage(pos + length, _no_crlf(length, length_at), start)
                raise _Torn(start, length_at)
            if buf[pos + length : pos + length + 2] != b"\r\n":
                raise _Damage(pos + length, _no_crlf(length, length_at), start)
            args.append(bytes(buf[pos : pos + length]))
            pos += length + 2
        yield start, args


def _no_crlf(length: int, length_at: int) -> str:
    """Either the terminator or the length is damaged: the reason names both places."""
    return f"bulk string not followed by CRLF (its length at byte offset {length_at} says {length})"


def _number(buf: mmap.mmap, start: int, pos: int, end: int, minimum: int) -> tuple[int, int]:
    """The decimal at `pos` up to CRLF, and the offset after the CRLF."""
    line_end = buf.find(b"\r\n", pos, end)
    if line_end < 0:
        partial = bytes(buf[pos:end])
        if partial.rstrip(b"\r").isdigit() or partial in (b"", b"\r"):
            raise _Torn(start)
        raise _Damage(pos, f"bad length {partial[:16]!r}", start)
    digits = bytes(buf[pos:line_end])
    if not digits.isdigit() or int(digits) < minimum or (len(digits) > 1 and digits[0] == 48):
        raise _Damage(pos, f"bad length {digits[:16]!r}", start)
    return int(digits), line_end + 2


def complete_records(path: str, start: int) -> int:
    """How many complete records the file holds from `start` on (a damaged record's start:
    what a cut there would drop, for `emqd --check-aof`).

    Past damage the count picks up again at the next complete op or MULTI after a
    CRLF, as a reader resynchronizing would; ops read from such a point up to an
    EXEC with no MULTI were the tail of a damaged block and are not counted. A
    value that holds RESP can make the count a little high: it is an estimate,
    for a person deciding whether to cut.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if start >= size:
            return 0
        with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as buf:
            count = 0
            pos = start + 1  # the record at `start` is the damaged one
            while (at := _complete_op_after(buf, pos, size, or_multi=True)) is not None:
                loose = 0  # standalone ops read since `at`, before any MULTI
                txn: int | None = None  # the offset of an open MULTI
                seen_multi = False
                try:
                    for offset, cmd in _commands(buf, at, size):
                        if cmd == [_MULTI]:
                            if txn is not None:
                                raise _Damage(offset, "", txn)
                            txn, seen_multi = offset, True
                        elif cmd == [_EXEC]:
                            if txn is not None:
                                count, txn = count + 1, None
                            elif seen_multi:
                                raise _Damage(offset, "", offset)
                            else:  # `at` was inside a block: its ops were that block's
                                count, loose = count - loose, 0
                        elif _problem(cmd) is not None:
                            raise _Damage(offset, "", offset if txn is None else txn)
                        elif txn is None:
                            count += 1
                            loose += 0 if seen_multi else 1
                    return count
                except _Damage as damage:
                    pos = damage.command + 1
                except _Torn as torn:
                    pos = torn.offset + 1
            return count

