"""RESP, sans-IO: bytes in -> requests (argv lists); replies -> bytes.

Requests: `RequestParser.feed(data)` returns the complete requests it now
holds (each a list of bytes) and keeps the rest for the next call; broken
framing raises `ProtocolError` with Redis's text. Multi-bulk requests are
parsed by `hiredis.Reader`; inline commands (`PING\\r\\n` typed into nc) are
split here, because hiredis refuses them.

Replies: `encode(value, resp)` for RESP2 (`resp=2`) or RESP3 (`resp=3`); see
`emqd/reply.py` for which Python value is which RESP type.
"""

from __future__ import annotations

import hiredis

from emqd.errors import ProtocolError, ReplyError
from emqd.numbers import format_double
from emqd.reply import NULL_ARRAY, Raw, Set, Verbatim

MAX_INLINE = 64 * 1024  # Redis's PROTO_INLINE_MAX_SIZE


class RequestParser:
    """Incremental request framing for one connection."""

    __slots__ = ("_reader", "_inline", "_in_reader")

    def __init__(self) -> None:
        self._reader = hiredis.Reader()
        self._inline = b""  # bytes of an unfinished inline command
        self._in_reader = False  # hiredis holds part of a multi-bulk request

    def feed(self, data: bytes) -> list[list[bytes]]:
        requests: list[list[bytes]] = []
        while data:
            if not self._in_reader and not self._inline and data[0] != 42:  # b"*"
                data = self._feed_inline(data, requests)
                continue
            if self._inline:
                data = self._feed_inline(data, requests)
                continue
            data = self._feed_multibulk(data, requests)
        return requests

    def _feed_multibulk(self, data: bytes, requests: list[list[bytes]]) -> bytes:
        reader = self._reader
        try:
            reader.feed(data)
            while True:
                request = reader.gets()
                if request is False:
                    self._in_reader = reader.has_data()
                    return b""
                if request is None or request == []:
                    continue  # `*-1` / `*0`: Redis skips an empty multi-bulk
                if type(request) is not list:
                    raise ProtocolError("Protocol error: expected '*'")
                for arg in request:
                    if type(arg) is not bytes:
                        raise ProtocolError(f"Protocol error: expected '$', got '{_type_byte(arg)}'")
                requests.append(request)
                if not reader.has_data():
                    self._in_reader = False
                    return b""
        except hiredis.ProtocolError as exc:
            raise ProtocolError(_redis_text(str(exc))) from None

    def _feed_inline(self, data: bytes, requests: list[list[bytes]]) -> bytes:
        """Every inline command at the front of `data`; returns the rest (a multi-bulk).

        One pass with an index over the buffer: slicing the rest off after each
        line would copy the buffer once per command of a pipeline.
        """
        buffered = self._inline + data if self._inline else data
        self._inline = b""
        start, size = 0, len(buffered)
        while start < size:
            if start and buffered[start] == 42:  # b"*": a multi-bulk request follows
                break
            end = buffered.find(b"\n", start)
            if end < 0:
                if size - start > MAX_INLINE:
                    raise ProtocolError("Protocol error: too big inline request")
                self._inline = buffered[start:]
                return b""
            args = split_inline(buffered[start:end].rstrip(b"\r"))
            if args:
                requests.append(args)
            start = end + 1
        return buffered[start:]


def split_inline(line: bytes) -> list[bytes]:
    """Split an inline command as Redis's sdssplitargs does (quotes, escapes)."""
    if 34 not in line and 39 not in line:  # no `"` or `'` (int tests are the fast ones)
        # No quotes, so no escapes: sdssplitargs splits on isspace(), which is
        # exactly the set bytes.split() uses; one C call instead of a byte loop.
        return line.split()
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in b" \t\r\n\v\f":
            i += 1
        if i >= n:
            return args
        current = bytearray()
        quote = 0
        while i < n:
            c = line[i]
            if quote == 0:
                if c in b" \t\r\n\v\f":
                    break
                if c in b"\"'":
                    quote = c
                else:
                    current.append(c)
                i += 1
            elif quote == 34:  # "..."
                if c == 92 and i + 1 < n:  # backslash escape
                    nxt = line[i + 1]
                    if nxt == 120 and i + 3 < n and _is_hex(line[i + 2 : i + 4]):  # \xHH
                        current.append(int(line[i + 2 : i + 4], 16))
                        i += 4
                        continue
                    current.append({110: 10, 114: 13, 116: 9, 98: 8, 97: 7}.get(nxt, nxt))
                    i += 2
                    continue
                if c == 34:
                    if i + 1 < n and line[i + 1] not in b" \t\r\n\v\f":
                        raise ProtocolError("Protocol error: unbalanced quotes in request")
                    quote = 0
                    i += 1
                    break
                current.append(c)
                i += 1
            else:  # '...'
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    current.append(39)
                    i += 2
                    continue
                if c == 39:
                    if i + 1 < n and line[i + 1] not in b" \t\r\n\v\f":
                        raise ProtocolError("Protocol error: unbalanced quotes in request")
                    quote = 0
                    i += 1
                    break
                current.append(c)
                i += 1
        if quote:
            raise ProtocolError("Protocol error: unbalanced quotes in request")
        args.append(bytes(current))


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair)


def _type_byte(value: object) -> str:
    if isinstance(value, int):
        return ":"
    if isinstance(value, list):
        return "*"
    if isinstance(value, hiredis.ReplyError):
        return "-"
    return "+"


def _redis_text(hiredis_text: str) -> str:
    if "multi-bulk" in hiredis_text.lower():
        return "Protocol error: invalid multibulk length"
    if "bulk" in hiredis_text.lower():
        return "Protocol error: invalid bulk length"
    return "Protocol error: " + hiredis_text


# --- replies -------------------------------------------------------------------
# Replies every pipeline repeats, encoded once: bytes formatting costs ~300 ns
# a reply here. Simple strings are the code's own status words (OK, PONG,
# QUEUED, type names), so the table stays small; it is bounded all the same.
_SMALL_INTS = tuple(b":%d\r\n" % n for n in range(1024))  # counts, failures, ...
_SIMPLE: dict[str, bytes] = {}
_SIMPLE_MAX = 256


def encode(value: object, resp: int) -> bytes:
    """The RESP bytes for a reply value (see emqd/reply.py for the mapping)."""
    t = type(value)
    if t is bytes:
        return b"$%d\r\n%b\r\n" % (len(value), value)  # type: ignore[arg-type]
    if t is int:
        if 0 <= value < 1024:  # type: ignore[operator]
            return _SMALL_INTS[value]  # type: ignore[index]
        return b":%d\r\n" % value  # type: ignore[str-format]
    if t is str:
        encoded = _SIMPLE.get(value)  # type: ignore[call-overload]
        if encoded is None:
            encoded = b"+%b\r\n" % value.encode()  # type: ignore[union-attr]
            if len(_SIMPLE) < _SIMPLE_MAX:
                _SIMPLE[value] = encoded  # type: ignore[index]
        return encoded
    if t is list or t is tuple:
        return b"*%d\r\n" % len(value) + b"".join([encode(v, resp) for v in value])  # type: ignore[arg-type]
    if value is None:
        return b"_\r\n" if resp == 3 else b"$-1\r\n"
    if t is dict:
        items = value.items()  # type: ignore[union-attr]
        parts = [encode(k, resp) + encode(v, resp) for k, v in items]
        head = b"%%%d\r\n" % len(parts) if resp == 3 else b"*%d\r\n" % (2 * len(parts))
        return head + b"".join(parts)
    if isinstance(value, ReplyError):
        return b"-%b\r\n" % value.message
    if t is float:
        text = format_double(value)  # type: ignore[arg-type]
        return b",%b\r\n" % text if resp == 3 else b"$%d\r\n%b\r\n" % (len(text), text)
    if t is bool:
        if resp == 3:
            return b"#t\r\n" if value else b"#f\r\n"
        return b":1\r\n" if value else b":0\r\n"
    if value is NULL_ARRAY:
        return b"_\r\n" if resp == 3 else b"*-1\r\n"
    if t is Verbatim:
        if resp == 3:
            body = value.format + b":" + value.text  # type: ignore[union-attr]
            return b"=%d\r\n%b\r\n" % (len(body), body)
        return encode(value.text, resp)  # type: ignore[union-attr]
    if t is Set:
        items = value.items  # type: ignore[union-attr]
        head = b"~%d\r\n" if resp == 3 else b"*%d\r\n"
        return head % len(items) + b"".join([encode(v, resp) for v in items])
    if t is Raw:
        return value.data  # type: ignore[union-attr]
    raise TypeError(f"cannot encode {value!r} as a reply")
