"""Fuzzing the request codec (emqd/wire/resp.py) with hypothesis: valid streams cut anywhere,
inline lines, the before-AUTH mode, and garbage.

Valid streams must come out exactly as they went in, whatever the cuts. Garbage
must come out as requests and at most one `ProtocolError` with one of Redis's
texts, last, and nothing after it; never another exception, never a hang
(hypothesis's deadline). `EMQD_FUZZ_EXAMPLES` scales the number of examples
(the suite's default keeps each test to a few seconds).
"""

from __future__ import annotations

import os
import re
from contextlib import nullcontext
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.errors import ProtocolError
from emqd.wire import resp
from emqd.wire.resp import (
    UNAUTH_MAX_BULK,
    UNAUTH_MAX_MULTIBULK,
    RequestParser,
    _plain_inline_lines,
    _plain_requests,
    split_inline,
)
from tests.support import encode_request

EXAMPLES = int(os.environ.get("EMQD_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=2000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

REDIS_TEXTS = {
    errors.PROTO_BAD_MULTIBULK_LENGTH, errors.PROTO_BAD_BULK_LENGTH,
    errors.PROTO_UNAUTH_MULTIBULK_LENGTH, errors.PROTO_UNAUTH_BULK_LENGTH,
    errors.PROTO_BIG_MBULK_COUNT, errors.PROTO_BIG_BULK_COUNT, errors.PROTO_BIG_INLINE,
    errors.PROTO_UNBALANCED_QUOTES,
}
EXPECTED_DOLLAR = re.compile(r"Protocol error: expected '\$', got '.'", re.S)

# Bytes that matter to the framing, often; any byte, sometimes.
framing_bytes = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from(b"*$\r\n0123456789-+: \"'\\x\t"), max_size=40).map(bytes),
)
# Bytes that send a chunk down another path: a big count, a non-bulk element, a
# header cut after its \r.
path_bytes = st.sampled_from([b"*10000", b"*12345\r\n", b"\r\n+5\r\n", b"\n=1", b"\n(", b"$4\r"])
argument = st.one_of(st.binary(max_size=30), framing_bytes, path_bytes)
argv = st.lists(argument, min_size=1, max_size=6)
big_argv = st.tuples(st.binary(max_size=8), st.integers(min_value=16_000, max_value=70_000)).map(
    lambda t: [b"ECHO", t[0] * (t[1] // max(1, len(t[0]))) or b"x" * t[1]])


def inline_token(arg: bytes) -> bytes:
    """An argument as an inline request writes it: plain, or quoted with hex escapes."""
    if arg and re.fullmatch(rb"[A-Za-z0-9_.-]+", arg):
        return arg
    return b'"' + b"".join(b"\\x%02x" % byte for byte in arg) + b'"'


# One element of a stream: its bytes and the requests it stands for.
multibulk = argv.map(lambda args: (encode_request(*args), [args]))
big = big_argv.map(lambda args: (encode_request(*args), [args]))  # past hiredis's first read
inline = st.tuples(
    st.lists(st.binary(max_size=12), min_size=1, max_size=5),
    st.sampled_from([b"\r\n", b"\n"]),
).map(lambda t: (b" ".join(map(inline_token, t[0])) + t[1], [t[0]]))
nothing = st.sampled_from([b"\r\n", b"\n", b"*0\r\n", b"*-1\r\n", b"*-7\r\n"]).map(
    lambda data: (data, []))
stream = st.lists(st.one_of(multibulk, multibulk, multibulk, inline, nothing, big),
                  min_size=1, max_size=20)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in zip(marks, marks[1:], strict=False)]


def parse(chunks: list[bytes], authenticated: bool = True) -> list:
    """Every request the chunks make, draining the one-at-a-time backlog as a
    connection does (after each request it owes, the client is still not logged in)."""
    parser = RequestParser()
    out: list = []
    for chunk in chunks:
        out += parser.feed(chunk, authenticated)
        while parser.backlog:
            out += parser.feed(b"", authenticated)
    return out


@pytest.mark.parametrize("plain", [False, True], ids=["as built", "plain readers on"])
@FUZZ
@given(stream, st.lists(st.integers(min_value=0), max_size=30))
def test_valid_streams_come_out_exactly_whatever_the_cuts(
        plain: bool, elements: list[tuple[bytes, list]], points: list[int]) -> None:
    # The compiled core reads plain requests itself; `plain` makes the pure one do so too.
    data = b"".join(part for part, _ in elements)
    expected = [request for _, requests in elements for request in requests]
    with patch.object(resp, "COMPILED", True) if plain else nullcontext():
        assert parse([data]) == expected
        assert parse(cut(data, points)) == expected


small_argv = st.lists(st.binary(max_size=UNAUTH_MAX_BULK // 800), min_size=1,
                      max_size=UNAUTH_MAX_MULTIBULK)


@FUZZ
@given(st.lists(small_argv, min_size=1, max_size=8), st.lists(st.integers(min_value=0),
                                                              max_size=20))
def test_before_auth_requests_come_one_at_a_time_and_whole(
        requests: list[list[bytes]], points: list[int]) -> None:
    data = b"".join(encode_request(*args) for args in requests)
    assert parse(cut(data, points), authenticated=False) == requests


@FUZZ
@given(st.lists(st.one_of(framing_bytes, multibulk.map(lambda t: t[0]),
                          inline.map(lambda t: t[0])), min_size=1, max_size=12),
       st.lists(st.integers(min_value=0), max_size=20), st.booleans())
def test_garbage_gives_requests_then_at_most_one_redis_protocol_error(
        parts: list[bytes], points: list[int], authenticated: bool) -> None:
    data = b"".join(parts)
    for chunks in ([data], cut(data, points)):
        parser = RequestParser()
        out: list = []
        for chunk in chunks:
            out += parser.feed(chunk, authenticated)
            while parser.backlog:
                out += parser.feed(b"", authenticated)
        errors_seen = [item for item in out if isinstance(item, ProtocolError)]
        assert len(errors_seen) <= 1
        if errors_seen:
            assert out[-1] is errors_seen[0]
            text = str(errors_seen[0])
            assert text in REDIS_TEXTS or EXPECTED_DOLLAR.fullmatch(text), text
            assert parser.feed(encode_request("PING")) == []  # broken framing stays broken
        for request in out[: len(out) - len(errors_seen)]:
            assert type(request) is list and request
            assert all(type(arg) is bytes for arg in request)


@FUZZ
@given(st.binary(max_size=200))
def test_split_inline_answers_arguments_or_none(line: bytes) -> None:
    args = split_inline(line)
    assert args is None or all(type(arg) is bytes for arg in args)


@FUZZ
@given(st.lists(st.binary(max_size=20), max_size=8))
def test_split_inline_reads_back_what_inline_token_wrote(args: list[bytes]) -> None:
    assert split_inline(b" ".join(map(inline_token, args))) == args


def _hiredis_alone(data: bytes) -> tuple[list, RequestParser]:
    """What the hiredis path makes of `data` (a chunk from a request's start), and the
    parser after it."""
    parser = RequestParser()
    out: list = []
    parser._feed_fast(data, out)
    return out, parser


@FUZZ
@given(stream, st.lists(st.integers(min_value=0), max_size=30))
def test_the_plain_reader_stops_at_a_request_start_having_read_what_hiredis_reads(
        elements: list[tuple[bytes, list]], points: list[int]) -> None:
    data = b"".join(part for part, _ in elements)
    for chunk in [data, *cut(data, points)]:
        got: list = []
        stop = _plain_requests(chunk, got)
        assert 0 <= stop <= len(chunk)
        if stop:
            read, parser = _hiredis_alone(chunk[:stop])
            assert got == read
            assert parser._tail == 0  # a request's end: hiredis holds nothing of the next
        else:
            assert got == []


@FUZZ
@given(st.lists(argv, min_size=1, max_size=12))
def test_the_plain_reader_reads_a_chunk_of_whole_plain_requests_to_its_end(
        requests: list[list[bytes]]) -> None:
    data = b"".join(encode_request(*args) for args in requests)
    got: list = []
    assert _plain_requests(data, got) == len(data)
    assert got == requests


inline_bytes = st.lists(st.sampled_from(b"PING x*\"'\t\r\n\v\f\0 "), max_size=60).map(bytes)


@FUZZ
@given(st.one_of(inline_bytes, st.lists(inline.map(lambda t: t[0]), max_size=8).map(b"".join)))
def test_the_plain_inline_reader_reads_whole_lines_as_sdssplitargs_does(data: bytes) -> None:
    buf = b"x " + data  # an inline line first, as the slow path hands it over
    got: list = []
    stop = _plain_inline_lines(buf, 0, got)
    assert stop == 0 or buf[stop - 1] == 10  # a line's start
    lines = buf[:stop].split(b"\n")[:-1]
    for line in lines:  # none that needs _inline's rules (a NUL: Redis waits for more)
        assert not any(byte in line for byte in b"\"'\v\f\0")
    expected = [split_inline(line[:-1] if line.endswith(b"\r") else line) for line in lines]
    assert got == [args for args in expected if args]
    if stop < len(buf):  # the line it stopped at needs _inline, is unfinished, or is `*`
        rest = buf[stop:]
        line = rest.split(b"\n", 1)[0]
        assert (b"\n" not in rest or rest[:1] == b"*"
                or any(byte in line for byte in b"\"'\v\f\0"))


@FUZZ
@given(st.lists(st.one_of(framing_bytes, path_bytes, multibulk.map(lambda t: t[0]),
                          inline.map(lambda t: t[0])), min_size=1, max_size=12),
       st.lists(st.integers(min_value=0), max_size=20))
def test_garbage_reads_the_same_with_the_plain_readers_on(
        parts: list[bytes], points: list[int]) -> None:
    data = b"".join(parts)
    for chunks in ([data], cut(data, points)):
        without = _feed_all(chunks)
        with patch.object(resp, "COMPILED", True):
            assert _same(_feed_all(chunks), without)


def _feed_all(chunks: list[bytes]) -> list:
    parser = RequestParser()
    out: list = []
    for chunk in chunks:
        out += parser.feed(chunk, True)
    return out


def _same(a: list, b: list) -> bool:
    """Requests equal, and a ProtocolError in the same place with the same text."""
    return [str(x) if isinstance(x, ProtocolError) else x for x in a] == \
        [str(x) if isinstance(x, ProtocolError) else x for x in b]


def _redis_rules(data: bytes) -> list:
    """`data` in one read by the slow path alone: Redis's processInlineBuffer and
    processMultibulkBuffer, which tests/wire/test_framing_vs_redis.py holds to a real
    redis-server."""
    parser = RequestParser()
    out: list = []
    try:
        parser._feed_slow(data, True, out, fast_ok=False)
    except ProtocolError as error:
        out.append(error)
    return out


# Elements as a careless or hostile client may write them: non-bulk elements of every
# RESP3 type, headers ended by `\r` and another byte, other bytes after a bulk.
element = st.one_of(
    argument.map(lambda arg: b"$%d\r\n%b\r\n" % (len(arg), arg)),
    argument.map(lambda arg: b"$%d\r\n%bXY" % (len(arg), arg)),
    argument.map(lambda arg: b"$%d\rX%b\r\n" % (len(arg), arg)),
    st.sampled_from([b"+x\r\n", b"=5\r\ntxt:a\r\n", b"(12\r\n", b":1\r\n", b",1.5\r\n",
                     b"#t\r\n", b"_\r\n", b"-e\r\n", b"%1\r\n", b"~1\r\n", b">1\r\n", b"|1\r\n",
                     b"*1\r\n", b"$-1\r\n"]),
)
request = st.tuples(st.integers(min_value=0, max_value=4), st.lists(element, max_size=4)).map(
    lambda t: b"*%d\r\n" % (t[0] or len(t[1])) + b"".join(t[1]))


@FUZZ
@given(st.lists(st.one_of(request, request, multibulk.map(lambda t: t[0]),
                          inline.map(lambda t: t[0]), framing_bytes), min_size=1, max_size=8),
       st.lists(st.integers(min_value=0), max_size=20), st.booleans())
def test_every_path_reads_a_stream_as_redis_rules_do(
        parts: list[bytes], points: list[int], plain: bool) -> None:
    # hiredis with its guards (and the compiled core's plain readers) must read what
    # Redis reads, requests and error alike; cut into reads too, but for the known
    # difference (docs/SERVER.md: a header ended by `\r` and a byte other than `\n` in a
    # request that arrives in more than one read).
    data = b"".join(parts)
    expected = _redis_rules(data)
    with patch.object(resp, "COMPILED", True) if plain else nullcontext():
        assert _same(_feed_all([data]), expected)
        if not re.search(rb"\r[^\n]", data):
            assert _same(_feed_all(cut(data, points)), expected)
