"""RESP, sans-IO: bytes in -> requests (argv lists); replies -> bytes.

Requests: `RequestParser.feed(data, authenticated)` returns the complete
requests it now holds (each a list of bytes) and keeps the rest for the next
call. Broken framing ends the list with a `ProtocolError` carrying Redis 7.0's
exact text: the connection answers the requests before it, then the error,
then closes, as Redis does.

Three readers, one set of rules:

- The fast path feeds each chunk to `hiredis.Reader` in one call. hiredis
  checks framing, but not Redis's limits, and it would buffer a declared
  `$99999999999` bulk without end. So whenever a chunk ends inside a request,
  the parser finds where that unfinished request starts (from the wire sizes
  of the requests hiredis completed, which are exact because hiredis accepts
  only canonical lengths) and checks its headers with `_Frame`, Redis's
  `processMultibulkBuffer` rules, before hiredis buffers more of it. The same
  sizes show where each element's `$` must be, which is how an element
  hiredis-py reads as a bulk and Redis refuses (`+x`) is found.
- Before it, the compiled core reads a chunk's plain requests itself
  (`_plain_requests`: whole, canonical, fewer than HIREDIS_MAX_ARGS
  arguments; `_plain_inline_lines` for inline lines that need only
  splitting), which costs a lone request a fifth of hiredis and its guard;
  the other paths go on from the first request that is anything else.
- The slow path is `_Frame` collecting arguments, plus `split_inline`
  (Redis's `sdssplitargs`) for inline commands. It runs for inline commands,
  for anything hiredis refuses or reads differently from Redis (`*-5`, a
  `:1` or `+x` element, a blank line after a request, a header ended by `\r`
  and another byte), and for a client that is not
  yet authenticated: Redis applies smaller limits to it (10 arguments, 16 KiB
  bulks) and parses its next request only after running the previous one
  (which may be the AUTH), so the parser hands it one request at a time.

Replies: `encode(value, resp)` for RESP2 (`resp=2`) or RESP3 (`resp=3`); see
`emqd/reply.py` for which Python value is which RESP type.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import chain, islice, repeat
from typing import Any, Final, cast

import hiredis

from emqd import errors
from emqd.compat.numbers import COMPILED, format_double, parse_int
from emqd.concat import joined
from emqd.errors import ProtocolError, ReplyError
from emqd.reply import BULKS, NULL_ARRAY, PAIRS, Raw, Set, Stream, Verbatim

MAX_INLINE: Final = 64 * 1024  # PROTO_INLINE_MAX_SIZE: an inline line, a header line
MAX_BULK: Final = 512 * 1024 * 1024  # proto-max-bulk-len
MAX_MULTIBULK: Final = 2**31 - 1  # INT_MAX
UNAUTH_MAX_MULTIBULK: Final = 10  # limits while a password is still owed
UNAUTH_MAX_BULK: Final = 16384

_SPACE: Final = b" \t\n\v\f\r"  # C isspace()

# hiredis allocates an array's whole list when it reads `*N` (and a RESP3 push
# `>N` or set `~N` reply's), so a client declaring `*2000000000` would cost
# gigabytes before sending anything. Requests of HIREDIS_MAX_ARGS arguments or
# more go through the slow path instead, which grows them as the arguments
# arrive, like Redis. `_BIG_COUNT` and `_BIG_AGGREGATE` find them in a chunk (or
# something that looks like them: then the chunk just takes the slow path,
# whose rules are Redis's). Two searches, not one pattern with a class of
# first bytes, which costs sre its fast literal scan (8x slower, measured); the
# second runs only when a `>` or `~` is there at all.
HIREDIS_MAX_ARGS: Final = 10_000
_BIG_COUNT: Final = re.compile(rb"\*[1-9][0-9]{4}")
_BIG_AGGREGATE: Final = re.compile(rb"[>~][1-9][0-9]{4}")
# Bytes that may begin what hiredis-py reads as a request's bulks where Redis reads
# something else (`_maybe_not_bulk`): then `_bulks_end` checks where the headers are.
_NOT_BULK_MARKERS: Final = (b"+", b"=", b"(", b"~", b">", b"|")
# What hiredis-py raises for a stream it cannot read: its ProtocolError, and a
# TypeError for a RESP3 map keyed by an array or a map, which it cannot build.
_HIREDIS_ERRORS: Final = (hiredis.ProtocolError, TypeError)
RELEASE_AFTER: Final = 1 << 20  # a request this big has its hiredis buffer freed once it is read


class RequestParser:
    """Incremental request framing for one connection."""

    __slots__ = ("_reader", "_tail", "_guard", "_buf", "_pos", "_frame", "_held", "failed")

    def __init__(self) -> None:
        self._reader = hiredis.Reader()
        self._tail = 0  # bytes of an unfinished request that hiredis holds
        self._guard: _Frame | None = None  # Redis's header checks on that request
        self._buf = b""  # slow path: bytes not parsed yet, from `_pos` on
        self._pos = 0
        self._frame: _Frame | None = None  # slow path: an unfinished multi-bulk request
        self._held = False  # `_buf` was held back after one request (before AUTH)
        self.failed = False  # framing broke: nothing more is parsed

    @property
    def backlog(self) -> bool:
        """Unparsed bytes wait for `feed(b"")`: one-at-a-time mode, before AUTH."""
        return self._held and not self.failed

    def feed(self, data: bytes, authenticated: bool = True) -> list[Any]:
        """Requests completed by `data`, in order; a `ProtocolError` last if framing broke."""
        if self.failed:
            return []
        requests: list[Any] = []
        self._held = False
        try:
            if self._tail:
                self._feed_fast(data, requests)
            elif (
                authenticated
                and data[:1] == b"*"
                and self._frame is None
                and self._pos >= len(self._buf)
            ):
                start = _plain_requests(data, requests) if COMPILED else 0
                if start < len(data):
                    self._feed_fast(data, requests, start)
            elif data or self._pos < len(self._buf):
                self._feed_slow(data, authenticated, requests, fast_ok=True)
        except ProtocolError as error:
            self.failed = True
            requests.append(error)
        return requests

    # --- fast path: hiredis ----------------------------------------------------------
    def _feed_fast(self, data: bytes, requests: list[Any], start: int = 0) -> None:
        """hiredis reads `data` from `start` (where this chunk's own requests begin, after
        the end of a request hiredis holds the start of, or after `_plain_requests`)."""
        continuing = self._tail > 0
        if continuing:
            guard = self._guard
            assert guard is not None  # set with `_tail`, when hiredis took a request's start
            head = guard.head
            try:
                start = guard.feed(data, 0)
            except _TooBig:
                # Its count line just completed: hiredis holds only `head`. Go slow.
                self._go_slow(head + data, requests)
                return
            if start < 0:
                self._reader.feed(data)
                self._tail += len(data)
                return
            if guard.left < 0:
                # `*0` / `*-1`, which Redis skips and hiredis would return: drop it.
                self._reset_fast()
                if start < len(data):
                    self._feed_slow(data[start:], True, requests, fast_ok=True)
                return
        reader = self._reader
        # From the chunk's start unless a request ran into it: requests that
        # _plain_requests read do not change which path reads the rest.
        if _big_count(data, start if continuing else 0):
            if continuing:
                reader.feed(data[:start])
                try:
                    held = reader.gets()
                except _HIREDIS_ERRORS:
                    held = None
                if type(held) is not list:  # a header the guard took (the known difference)
                    raise ProtocolError(errors.PROTO_BAD_BULK_LENGTH)
                requests.append(held)
            self._go_slow(data[start:], requests)
            return
        if start and not continuing:
            reader.feed(data, start)
        else:
            reader.feed(data)
        got: list[list[bytes]] = []
        item: object = None
        try:
            while True:
                item = reader.gets()
                if item is False:
                    break
                if type(item) is not list or not item:
                    raise _Refused  # `*0`, `*-1`, `:1`, `+x`: not a request as hiredis reads it
                for arg in item:
                    if type(arg) is not bytes:
                        raise _Refused  # `$-1` or a nested type inside the request
                got.append(item)
                if not reader.has_data():
                    break
        except (_Refused, *_HIREDIS_ERRORS):
            if continuing and not got:
                raise ProtocolError(errors.PROTO_BAD_BULK_LENGTH) from None
            # Redis reads this part differently from hiredis: redo it its way.
            offset = self._keep_bulks_only(data, start, got, continuing, requests)
            if offset >= 0:
                self._go_slow(data[offset:], requests)
            return
        # hiredis keeps the buffer a big request was read into until its next feed: a
        # fresh reader frees it now, before the request's plan is logged (a big value
        # costs about its size: docs/SERVER.md).
        release = continuing and self._tail >= RELEASE_AFTER
        if item is not False:
            if not _maybe_not_bulk(data, start):
                requests.extend(got)
            elif self._keep_bulks_only(data, start, got, continuing, requests) < 0:
                return
            self._tail = 0
            self._guard = None
            if release:
                self._reader = hiredis.Reader()
            return
        # The chunk ends inside a request: check its headers before hiredis holds more.
        if continuing and not got:
            raise ProtocolError(errors.PROTO_BAD_BULK_LENGTH)  # hiredis disagrees with the guard
        offset = self._keep_bulks_only(data, start, got, continuing, requests)
        if offset < 0:
            return
        if data[offset] != 42:  # b"*": an inline line (`-x`, `:1`, ending in LF or not yet ended)
            self._reset_fast()
            self._feed_slow(data[offset:], True, requests, fast_ok=True)
            return
        guard = self._guard = _Frame(collect=False, authenticated=True, max_args=HIREDIS_MAX_ARGS)
        if guard.feed(data, offset) >= 0:
            # Whole by Redis's rules where hiredis waits (a header ended by `\r` and a byte
            # other than `\n`, which Redis skips unread): Redis's reading.
            self._go_slow(data[offset:], requests)
            return
        self._tail = len(data) - offset
        if release:  # the next request's first bytes go to the fresh reader
            self._reader = hiredis.Reader()
            self._reader.feed(data[offset:])

    def _keep_bulks_only(self, data: bytes, start: int, got: list[list[bytes]],
                         continuing: bool, requests: list[Any]) -> int:
        """Take the requests hiredis read that were sent as an array of bulks (all of `got`
        but those from the first sent otherwise on), and the offset after them; when it
        stopped short, the rest of the chunk goes Redis's way and the answer is -1.

        hiredis-py reads a simple string (`+x`), a verbatim string (`=`) or a big
        number (`(`) inside an array as a bulk's bytes, where Redis refuses anything
        but `$`, and a RESP3 set or push at the top as a list, where Redis reads an
        inline line; the element can follow any two bytes (those after a bulk are
        skipped unread), so only where each header must begin tells. The request the
        guard watched (`continuing`) had its headers checked as they came.
        """
        own = got[1:] if continuing else got
        good, offset = _bulks_end(data, start, own)
        requests.extend(got[: len(got) - len(own) + good])
        if good < len(own):
            self._go_slow(data[offset:], requests)
            return -1
        return offset

    def _reset_fast(self) -> None:
        """hiredis and its guard hold nothing from here on."""
        self._reader = hiredis.Reader()
        self._tail = 0
        self._guard = None

    def _go_slow(self, rest: bytes, requests: list[Any]) -> None:
        """The rest of the chunk, which hiredis would read differently from Redis, Redis's way."""
        self._reset_fast()
        self._feed_slow(rest, True, requests, fast_ok=False)

    # --- slow path: Redis's rules in Python --------------------------------------------
    def _feed_slow(self, data: bytes, authenticated: bool, requests: list[Any],
                   fast_ok: bool) -> None:
        if self._pos >= len(self._buf):
            buf, pos = data, 0
        elif data:
            buf, pos = self._buf[self._pos :] + data, 0
        else:  # one request at a time: walk the held bytes without copying them
            buf, pos = self._buf, self._pos
        self._buf, self._pos = b"", 0
        n = len(buf)
        while pos < n:
            frame = self._frame
            if frame is None:
                if buf[pos] != 42:  # b"*"
                    if authenticated:
                        end = _inline_lines(buf, pos, requests)
                        if end > pos:
                            pos = end
                            continue
                    end = _inline(buf, pos, requests)
                    if end < 0:
                        self._buf, self._pos = buf, pos  # an unfinished line
                        return
                    pos = end
                    if requests and not authenticated and type(requests[-1]) is list:
                        break
                    continue
                if fast_ok and authenticated:
                    self._feed_fast(buf[pos:] if pos else buf, requests)
                    return
                frame = self._frame = _Frame(collect=True, authenticated=authenticated)
            end = frame.feed(buf, pos)
            if end < 0:
                return  # the frame keeps what it needs
            self._frame = None
            pos = end
            if frame.args:
                requests.append(frame.args)
                if not authenticated:
                    break
        if pos < n:
            self._buf, self._pos = buf, pos
            self._held = True


class _Refused(Exception):
    """hiredis returned something that Redis would read differently."""


class _TooBig(Exception):
    """A request with more arguments than hiredis should allocate for at once."""


class _Frame:
    """One multi-bulk request under Redis 7.0's `processMultibulkBuffer` rules, fed in pieces.

    With `collect` the arguments are kept (the slow path); without it only the
    headers are checked and the bodies skipped (the guard of the fast path).
    """

    __slots__ = (
        "collect", "authenticated", "max_args", "left", "bulk", "size", "head", "parts", "args"
    )

    def __init__(self, collect: bool, authenticated: bool, max_args: int = MAX_MULTIBULK) -> None:
        self.collect = collect
        self.authenticated = authenticated
        self.max_args = max_args  # more raises _TooBig (the guard's hand-over to the slow path)
        self.left = -1  # arguments still to come; -1 before the `*` line
        self.bulk = -1  # bytes of the current argument still to come, with its 2 closing bytes
        self.size = 0  # the current argument's length
        self.head = b""  # an unfinished header line
        self.parts: list[bytes] = []  # pieces of the current argument
        self.args: list[bytes] = []

    def feed(self, data: bytes, pos: int) -> int:
        """Consume `data[pos:]`: the offset just past the request when it ends there, else -1."""
        if not self.head:
            return self._feed(data, pos)
        head, self.head = self.head, b""
        end = self._feed(head + data[pos:], 0)
        return end if end < 0 else end - len(head) + pos

    def _feed(self, data: bytes, pos: int) -> int:
        n = len(data)
        while True:
            if self.bulk < 0:
                cr = data.find(b"\r", pos)
                if data.find(b"\0", pos, cr if cr >= 0 else n) >= 0:
                    cr = -1  # Redis looks for the line's end with strchr, which stops at NUL
                if cr < 0:
                    if n - pos > MAX_INLINE:
                        raise ProtocolError(
                            errors.PROTO_BIG_MBULK_COUNT
                            if self.left < 0
                            else errors.PROTO_BIG_BULK_COUNT
                        )
                    self.head = data[pos:]
                    return -1
                if cr > n - 2:  # the byte after `\r` has not arrived
                    self.head = data[pos:]
                    return -1
                if self.left < 0:
                    count = parse_int(data[pos + 1 : cr])
                    if count is None or count > MAX_MULTIBULK:
                        raise ProtocolError(errors.PROTO_BAD_MULTIBULK_LENGTH)
                    if count > UNAUTH_MAX_MULTIBULK and not self.authenticated:
                        raise ProtocolError(errors.PROTO_UNAUTH_MULTIBULK_LENGTH)
                    if count >= self.max_args:
                        self.head = data[pos:]
                        raise _TooBig
                    pos = cr + 2
                    if count <= 0:
                        return pos  # an empty request (`left` stays -1): Redis skips it
                    self.left = count
                    continue
                if data[pos] != 36:  # b"$"
                    raise ProtocolError(errors.proto_expected_dollar(data[pos]))
                size = parse_int(data[pos + 1 : cr])
                if size is None or size < 0 or size > MAX_BULK:
                    raise ProtocolError(errors.PROTO_BAD_BULK_LENGTH)
                if size > UNAUTH_MAX_BULK and not self.authenticated:
                    raise ProtocolError(errors.PROTO_UNAUTH_BULK_LENGTH)
                pos = cr + 2
                self.size = size
                self.bulk = size + 2
            take = min(n - pos, self.bulk)
            if self.collect and take:
                self.parts.append(data[pos : pos + take])
            pos += take
            self.bulk -= take
            if self.bulk:
                return -1
            if self.collect:
                parts, self.parts = self.parts, []
                arg = parts[0] if len(parts) == 1 else b"".join(parts)
                self.args.append(arg[: self.size])
            self.bulk = -1
            self.left -= 1
            if not self.left:
                return pos


def _big_count(data: bytes, pos: int) -> bool:
    """Whether `data[pos:]` may declare an aggregate too big for hiredis to allocate."""
    if _BIG_COUNT.search(data, pos):
        return True
    if data.find(b">", pos) < 0 and data.find(b"~", pos) < 0:
        return False
    return _BIG_AGGREGATE.search(data, pos) is not None


def _maybe_not_bulk(data: bytes, pos: int) -> bool:
    """Whether `data[pos:]` holds a byte that may begin what hiredis-py reads as a request's
    bulks and Redis refuses or reads as an inline line: an element `+x`, `=`, `(`, or a
    RESP3 set `~`, push `>` or attribute `|` (returned as a list). One scan in C each, far
    cheaper than a regex's search for any of them."""
    for marker in _NOT_BULK_MARKERS:
        if data.find(marker, pos) >= 0:
            return True
    return False


def _bulks_end(data: bytes, pos: int, requests: list[list[bytes]]) -> tuple[int, int]:
    """How many of `requests`, as hiredis read them from `data[pos:]`, were sent as an
    array (`*`) with a `$` at every element's header, and the offset after those.

    Their wire sizes are exact while they are so (hiredis accepts only
    canonical lengths), so the first header that is anything else is found
    where it begins."""
    n = len(data)
    for k in range(len(requests)):
        request = requests[k]
        if data[pos] != 42:  # b"*"
            return k, pos
        at = pos + 3 + len(str(len(request)))  # `*N\r\n`
        for arg in request:
            if at >= n or data[at] != 36:  # b"$"
                return k, pos
            size = len(arg)
            at += size + 5 + (1 if size < 10 else len(str(size)))  # `$L\r\n` + arg + 2
        pos = at
    return len(requests), pos


# What makes an inline line need _inline's rules, line by line: quotes and
# escapes, \v and \f (split_inline says why), a NUL (Redis's strchr stops at
# it), and a line that starts a multi-bulk request.
_INLINE_SPECIAL: Final = (b'"', b"'", b"\v", b"\f", b"\0", b"\n*")


def _plain_requests(data: bytes, requests: list[Any]) -> int:
    """The compiled core's reading of a chunk's plain requests, without hiredis: the offset
    where it stopped (`len(data)` when it read them all).

    A plain request is complete in the chunk and written as every client writes
    one: `*N` with 1 <= N < HIREDIS_MAX_ARGS, then N bulks `$L` + L bytes, every
    number canonical and every header line ending in CRLF (the two bytes after a
    bulk are skipped unread, as Redis and hiredis do). It stops, at the start of the
    request, at anything else (a request the chunk does not hold whole, an inline
    command, `*0`, a leading zero, a header without its CRLF): hiredis and the guards read
    the rest as before, from a request's start, which is where they would be
    after reading these requests themselves. Compiled, a lone ADD is read in
    about a fifth of what hiredis costs with the `_BIG_COUNT` guard (each of
    three calls into a C extension is a generic call); interpreted, byte-by-byte
    Python would cost more than hiredis, so the pure core keeps hiredis alone.
    """
    n = len(data)
    pos = 0
    while pos < n and data[pos] == 42:  # b"*"
        i = pos + 1
        if i >= n or not 49 <= data[i] <= 57:  # a count starts with 1-9
            return pos
        count = 0
        while i < n and 48 <= data[i] <= 57:
            count = count * 10 + data[i] - 48
            if count >= HIREDIS_MAX_ARGS:
                return pos
            i += 1
        if i + 1 >= n or data[i] != 13 or data[i + 1] != 10:
            return pos
        i += 2
        args: list[bytes] = []
        for _ in range(count):
            if i + 1 >= n or data[i] != 36:  # b"$"
                return pos
            i += 1
            first = data[i]
            if first == 48:  # b"0": an empty argument
                length = 0
                i += 1
            elif 49 <= first <= 57:
                length = 0
                while i < n and 48 <= data[i] <= 57:
                    length = length * 10 + data[i] - 48
                    if length > MAX_BULK:
                        return pos
                    i += 1
            else:
                return pos
            if i + 1 >= n or data[i] != 13 or data[i + 1] != 10:
                return pos
            i += 2
            end = i + length
            if end + 2 > n:
                return pos
            args.append(data[i:end])
            i = end + 2
        requests.append(args)
        pos = i
    return pos


def _inline_lines(buf: bytes, pos: int, requests: list[Any]) -> int:
    """Every complete inline line from `pos` on, in one pass, when none needs more than
    `bytes.split` (see _INLINE_SPECIAL): the offset after the last one, or `pos` when
    the lines must go one by one. A pipeline of inline commands (redis-benchmark's
    inline PING) then costs one split of the chunk, not two finds and a slice a line.
    The compiled core reads the lines byte by byte instead (`_plain_inline_lines`)."""
    if COMPILED:
        return _plain_inline_lines(buf, pos, requests)
    last = buf.rfind(b"\n", pos)
    if last < 0:
        return pos
    region = buf[pos:last]
    for special in _INLINE_SPECIAL:
        if special in region:
            return pos
    for line in region.split(b"\n"):
        args = line.split()  # the line's trailing \r is whitespace, as sdssplitargs sees it
        if args:
            requests.append(args)
    return last + 1


def _plain_inline_lines(buf: bytes, pos: int, requests: list[Any]) -> int:
    """`_inline_lines` in one compiled pass: the complete lines from `pos` on, up to the
    first that needs more than `bytes.split` (the offset of that one, which `_inline`
    then reads), or the start of a multi-bulk request. Interpreted, this loop would
    cost several times the two C splits; compiled, a third of them."""
    n = len(buf)
    if buf[n - 1] != 10:  # only whole lines: an unfinished one would be walked again per read
        n = buf.rfind(b"\n", pos) + 1
    start = pos  # where the line being read begins
    args: list[bytes] = []
    token = -1  # where the argument being read begins; -1 between arguments
    i = pos
    while i < n:
        c = buf[i]
        if c == 10:  # the line is whole (a \r before it is whitespace, as for split)
            if token >= 0:
                args.append(buf[token:i])
                token = -1
            if args:
                requests.append(args)
                args = []
            i += 1
            start = i
            if i < n and buf[i] == 42:  # b"*": a multi-bulk request
                return start
            continue
        if c == 32 or c == 9 or c == 13:
            if token >= 0:
                args.append(buf[token:i])
                token = -1
        elif c == 34 or c == 39 or c == 11 or c == 12 or c == 0:  # see _INLINE_SPECIAL
            return start
        elif token < 0:
            token = i
        i += 1
    return start


def _inline(buf: bytes, pos: int, requests: list[Any]) -> int:
    """Redis's processInlineBuffer: the offset after the line, or -1 if it is unfinished."""
    newline = buf.find(b"\n", pos)
    if buf.find(b"\0", pos, newline if newline >= 0 else len(buf)) >= 0:
        newline = -1  # strchr stops at NUL
    if newline < 0:
        if len(buf) - pos > MAX_INLINE:
            raise ProtocolError(errors.PROTO_BIG_INLINE)
        return -1
    end = newline - 1 if newline > pos and buf[newline - 1] == 13 else newline
    args = split_inline(buf[pos:end])
    if args is None:
        raise ProtocolError(errors.PROTO_UNBALANCED_QUOTES)
    if args:
        requests.append(args)
    return newline + 1


_ESCAPES: Final = {110: 10, 114: 13, 116: 9, 98: 8, 97: 7}  # \n \r \t \b \a
_HEX: Final = b"0123456789abcdefABCDEF"


def split_inline(line: bytes) -> list[bytes] | None:
    """Redis's sdssplitargs: the arguments of an inline command, None on unbalanced quotes."""
    if 34 not in line and 39 not in line and 11 not in line and 12 not in line:
        # No quotes (so no escapes), no \v or \f (which sdssplitargs skips between
        # arguments but keeps inside one): bytes.split() is then exactly it, in C.
        return line.split()
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return args
        current = bytearray()
        quote = 0  # 34 inside "...", 39 inside '...'
        while True:
            c = line[i] if i < n else 0
            if quote == 34:
                if c == 92 and i + 3 < n and line[i + 1] == 120 \
                        and line[i + 2] in _HEX and line[i + 3] in _HEX:
                    current.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 92 and i + 1 < n:
                    i += 1
                    current.append(_ESCAPES.get(line[i], line[i]))
                elif c == 34:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None  # a closing quote must be followed by a space
                    i += 1
                    break
                elif i >= n:
                    return None  # unterminated quotes
                else:
                    current.append(c)
            elif quote == 39:
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    current.append(39)
                elif c == 39:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    i += 1
                    break
                elif i >= n:
                    return None
                else:
                    current.append(c)
            elif c in b" \n\r\t" or i >= n:
                break
            elif c == 34 or c == 39:
                quote = c
            else:
                current.append(c)
            i += 1
        args.append(bytes(current))


# --- replies -------------------------------------------------------------------
# Replies every pipeline repeats, encoded once: bytes formatting costs ~300 ns
# a reply here. Simple strings are the code's own status words (OK, PONG,
# QUEUED, type names), so the table stays small; it is bounded all the same.
_SMALL_INTS: Final = tuple(b":%d\r\n" % n for n in range(1024))  # counts, failures, ...
_BULK_HEADS: Final = tuple(b"$%d\r\n" % n for n in range(1024))  # ids, tokens, payloads
_ARRAY_HEADS: Final = tuple(b"*%d\r\n" % n for n in range(32))  # a claimed job, a FAIL's answer
_SIMPLE: Final[dict[str, bytes]] = {}
_SIMPLE_MAX: Final = 256


def _bulk_head(n: int) -> bytes:
    """A bulk string's header, from a table below 1,024 bytes (formatting its length cost
    ~150 instructions, a job cycle's replies hold five)."""
    return _BULK_HEADS[n] if n < 1024 else b"$%d\r\n" % n


def _bulk(value: bytes) -> bytes:
    """A bulk string."""
    return b"%b%b\r\n" % (_bulk_head(len(value)), value)


def encode_request(argv: Sequence[bytes]) -> bytes:
    """A command as a client sends it (an array of bulk strings): what the cluster's
    loader and router write to a node over their own connections."""
    return b"".join([b"*%d\r\n" % len(argv), *map(_bulk, argv)])


def encode(value: Any, resp: int) -> bytes:
    """The RESP bytes for a reply value (see emqd/reply.py for the mapping)."""
    t = type(value)
    if t is bytes:
        return _bulk(value)
    if t is int:
        number: int = value
        if 0 <= number < 1024:
            return _SMALL_INTS[number]
        return b":%d\r\n" % number
    if t is str:
        encoded = _SIMPLE.get(value)
        if encoded is None:
            encoded = b"+%b\r\n" % value.encode()
            if len(_SIMPLE) < _SIMPLE_MAX:
                _SIMPLE[value] = encoded
        return encoded
    if t is list or t is tuple:
        # Bulk strings without a call of `encode`: most arrays (a claimed job, HGETALL,
        # ZRANGE) hold mostly bytes, and the call cost as much as the formatting.
        n = len(value)
        parts = [_ARRAY_HEADS[n] if n < 32 else b"*%d\r\n" % n]
        for v in value:
            parts.append(_bulk(v) if type(v) is bytes else encode(v, resp))
        return joined(parts)
    if value is None:
        return b"_\r\n" if resp == 3 else b"$-1\r\n"
    if t is dict:
        items = value.items()
        parts = [encode(k, resp) + encode(v, resp) for k, v in items]
        head = b"%%%d\r\n" % len(parts) if resp == 3 else b"*%d\r\n" % (2 * len(parts))
        return head + b"".join(parts)
    if isinstance(value, ReplyError):
        return b"-%b\r\n" % value.message
    if t is float:
        text = format_double(value)
        return b",%b\r\n" % text if resp == 3 else _bulk(text)
    if t is bool:
        if resp == 3:
            return b"#t\r\n" if value else b"#f\r\n"
        return b":1\r\n" if value else b":0\r\n"
    if value is NULL_ARRAY:
        return b"_\r\n" if resp == 3 else b"*-1\r\n"
    if t is Verbatim:
        if resp == 3:
            body = value.format + b":" + value.text
            return b"=%d\r\n%b\r\n" % (len(body), body)
        return encode(value.text, resp)
    if t is Set:
        items = value.items
        head = b"~%d\r\n" if resp == 3 else b"*%d\r\n"
        return head % len(items) + b"".join([encode(v, resp) for v in items])
    if t is Raw:
        raw: bytes = value.data
        return raw
    if t is Stream:  # in EXEC's array, or to a subscriber (wire/protocol.py streams the rest)
        return b"".join(stream_chunks(value, resp))
    raise TypeError(f"cannot encode {value!r} as a reply")


# --- big replies: a Stream, in chunks ---------------------------------------------
STREAM_ITEMS: Final = 1024  # items a chunk holds (about 100 KiB of a KEYS reply of job keys)
_CRLF: Final = b"\r\n"


def stream_chunks(stream: Stream, resp: int) -> Iterator[bytes]:
    """A Stream's RESP bytes: its header, then a chunk per STREAM_ITEMS items, each made
    only when asked for. A chunk is formatted in C (headers looked up, values
    chained in, one join), so each value is copied once, into its chunk, instead of
    into a bulk string of its own and then again into the whole reply."""
    count, form = stream.count, stream.form
    if form == BULKS:
        yield b"*%d\r\n" % count
        items = cast("Iterator[bytes]", iter(stream.items))
        for _ in range(0, count, STREAM_ITEMS):
            yield _bulks(list(islice(items, STREAM_ITEMS)))
    elif form == PAIRS:
        names, values = cast("tuple[list[bytes], list[bytes]]", stream.items)
        yield b"%%%d\r\n" % count if resp == 3 else b"*%d\r\n" % (2 * count)
        for at in range(0, count, STREAM_ITEMS):
            yield _bulk_pairs(names[at:at + STREAM_ITEMS], values[at:at + STREAM_ITEMS])
    else:
        yield b"*%d\r\n" % (count if resp == 3 else 2 * count)
        pairs = cast("Iterator[tuple[float, bytes]]", iter(stream.items))
        for _ in range(0, count, STREAM_ITEMS):
            yield _scored(list(islice(pairs, STREAM_ITEMS)), resp)


def _heads(values: list[bytes]) -> list[bytes]:
    return [_bulk_head(n) for n in map(len, values)]


def _bulks(values: list[bytes]) -> bytes:
    return b"".join(chain.from_iterable(zip(_heads(values), values, repeat(_CRLF))))


def _bulk_pairs(names: list[bytes], values: list[bytes]) -> bytes:
    return b"".join(chain.from_iterable(zip(
        _heads(names), names, repeat(_CRLF), _heads(values), values, repeat(_CRLF))))


def _scored(pairs: list[tuple[float, bytes]], resp: int) -> bytes:
    """WITHSCORES' items as `encode` writes them: [member, score] arrays under RESP3 (the
    score a double), member and score as bulk strings under RESP2."""
    if resp == 3:
        return b"".join([b"*2\r\n$%d\r\n%b\r\n,%b\r\n" % (len(member), member, format_double(score))
                         for score, member in pairs])
    parts: list[bytes] = []
    for score, member in pairs:
        text = format_double(score)
        parts += (_bulk_head(len(member)), member, _CRLF, _bulk(text))
    return b"".join(parts)


def reply_end(buffer: bytes | bytearray, at: int) -> int | None:
    """Where the RESP2/RESP3 reply starting at `at` ends (None: not all of it is here)."""
    line_end = buffer.find(b"\r\n", at)
    if line_end < 0:
        return None
    kind = buffer[at:at + 1]
    after = line_end + 2
    if kind in (b"$", b"=", b"!"):
        size = int(buffer[at + 1:line_end])
        if size < 0:
            return after
        return after + size + 2 if len(buffer) >= after + size + 2 else None
    if kind in (b"*", b"~", b">", b"%", b"|"):
        count = int(buffer[at + 1:line_end])
        if count < 0:
            return after
        if kind in (b"%", b"|"):
            count *= 2
        for _ in range(count):
            end = reply_end(buffer, after)
            if end is None:
                return None
            after = end
        return reply_end(buffer, after) if kind == b"|" else after  # an attribute's value
    return after  # + - : _ , # ( : one line
