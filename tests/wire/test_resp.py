"""The codec without sockets: every framing case fed whole, byte by byte, in
random cuts and with trailing bytes, and the reply encoders."""

from __future__ import annotations

import random
import tracemalloc
from unittest.mock import patch

import pytest

from emqd.errors import ProtocolError
from emqd.reply import NULL_ARRAY, Raw, Set, Verbatim
from emqd.wire import resp
from emqd.wire.resp import MAX_BULK, RequestParser, _plain_requests, encode, split_inline
from tests.support import encode_request

PING = b"*1\r\n$4\r\nPING\r\n"

# (bytes in, the requests out, the error text or None). Errors are Redis 7.0's,
# checked against a real redis-server in test_framing_vs_redis.py.
CASES = [
    (PING, [[b"PING"]], None),
    (b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", [[b"ECHO", b""]], None),
    (b"*3\r\n$4\r\nHSET\r\n$1\r\nk\r\n$11\r\nbin\r\n\x00*1\r\n$\r\n",
     [[b"HSET", b"k", b"bin\r\n\x00*1\r\n$"]], None),
    (b"PING\r\n", [[b"PING"]], None),
    (b"PING\n", [[b"PING"]], None),
    (b"\r\n\r\n" + PING, [[b"PING"]], None),
    (b"*0\r\n*-1\r\n*-5\r\n" + PING, [[b"PING"]], None),
    (PING + b"\r\n\r\n" + PING, [[b"PING"], [b"PING"]], None),
    (b"*1\r\n$4\r\nPINGxx" + PING, [[b"PING"], [b"PING"]], None),  # Redis skips 2 bytes blindly
    (PING + b"+PING\r\n", [[b"PING"], [b"+PING"]], None),
    (PING + b":1\r\n", [[b"PING"], [b":1"]], None),
    (PING + b"-\n", [[b"PING"], [b"-"]], None),  # hiredis waits for a CRLF here (the fuzz found it)
    (PING + b"-x\n" + PING, [[b"PING"], [b"-x"], [b"PING"]], None),
    (PING + b"$5\n:1\n", [[b"PING"], [b"$5"], [b":1"]], None),
    (b'ECHO "a b" \'c d\' e\\x41\r\n', [[b"ECHO", b"a b", b"c d", b"e\\x41"]], None),
    (b'ECHO "\\x41\\n\\t\\"q"\r\n', [[b"ECHO", b"A\n\t\"q"]], None),
    (b"ECHO 'it\\'s'\r\n", [[b"ECHO", b"it's"]], None),
    (b"ECHO a\"b c\" d\r\n", [[b"ECHO", b"ab c", b"d"]], None),
    (b"ECHO a\"b c\"d\r\n", [], "Protocol error: unbalanced quotes in request"),
    (b"ECHO a\x0bb\r\n", [[b"ECHO", b"a\x0bb"]], None),  # \v splits only between arguments
    (b"*abc\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*01\r\n" + PING, [], "Protocol error: invalid multibulk length"),
    (b"* 1\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*2147483648\r\n", [], "Protocol error: invalid multibulk length"),
    (b"*1\r\n$abc\r\n", [], "Protocol error: invalid bulk length"),
    (b"*1\r\n$-5\r\n", [], "Protocol error: invalid bulk length"),
    (b"*1\r\n$-1\r\n", [], "Protocol error: invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", [], "Protocol error: invalid bulk length"),
    (b"*1\r\n$%d\r\n" % (MAX_BULK + 1), [], "Protocol error: invalid bulk length"),
    (b"*2\r\n$4\r\nECHO\r\n:1\r\n", [], "Protocol error: expected '$', got ':'"),
    (b"*1\r\n*1\r\n", [], "Protocol error: expected '$', got '*'"),
    (b"*2\r\n$1\r\na\r\n\r\n", [], "Protocol error: expected '$', got ' '"),
    (PING + b"*1\r\nPING\r\n", [[b"PING"]], "Protocol error: expected '$', got 'P'"),
    (b'ECHO "abc\r\n', [], "Protocol error: unbalanced quotes in request"),
    (b'ECHO "a"b\r\n', [], "Protocol error: unbalanced quotes in request"),
    (b"ECHO 'a'b\r\n", [], "Protocol error: unbalanced quotes in request"),
    (b"A" * 70000, [], "Protocol error: too big inline request"),
    (b"*1" + b"1" * 70000, [], "Protocol error: too big mbulk count string"),
    (b"*1\r\n$" + b"1" * 70000, [], "Protocol error: too big bulk count string"),
    # an element that is not a bulk, after a bulk whose two closing bytes are not CRLF
    # (skipped unread): hiredis-py reads it as a bulk's bytes, Redis refuses it
    (b"*2\r\n$4\r\nECHOXY+x\r\n", [], "Protocol error: expected '$', got '+'"),
    (b"*2\r\n$4\r\nECHOXY(12\r\n", [], "Protocol error: expected '$', got '('"),
    (b"*2\r\n$4\r\nECHOXY=5\r\ntxt:a\r\n", [], "Protocol error: expected '$', got '='"),
    (PING + b"*3\r\n$4\r\nECHO\r\n$1\r\naXY+x\r\n$1\r\nb\r\n" + PING, [[b"PING"]],
     "Protocol error: expected '$', got '+'"),
    # what the misread would have run: the bytes of the next request's bulk as commands
    (b"*2\r\n$4\r\nECHOXY+x\r\n*2\r\n$4\r\nECHO\r\n$40\r\nhello\r\nFLUSHALL\r\n"
     b"rest-of-the-forty-byte-value\r\n", [], "Protocol error: expected '$', got '+'"),
    (b"*2\r\n$4\r\nECHOXY+x\r\n*2\r\n$4\r\nECHO\r\n$12\r\n\r\nFLUSHALL\r\n\r\n:1\r\n", [],
     "Protocol error: expected '$', got '+'"),
    (b"*1\r\n>100000000\r\n", [], "Protocol error: expected '$', got '>'"),
    (b"*1\r\n~100000000\r\n", [], "Protocol error: expected '$', got '~'"),
    (PING + b">10000000\r\n", [[b"PING"], [b">10000000"]], None),  # an inline line
    # a top-level RESP3 set or push, which hiredis-py returns as a list: inline lines
    (PING + b"~1\r\n$0\r\n\r\n", [[b"PING"], [b"~1"], [b"$0"]], None),
    (PING + b">2\r\n$1\r\na\r\n$1\r\nb\r\n", [[b"PING"], [b">2"], [b"$1"], [b"a"], [b"$1"], [b"b"]],
     None),
    # a map keyed by an array: hiredis-py raises TypeError building it (the fuzz found it)
    (PING + b"*1\r\n%1\r\n*0\r\n:1\r\n", [[b"PING"]], "Protocol error: expected '$', got '%'"),
]


def _case_id(case: object) -> str:
    return repr(case)[:40] if isinstance(case, bytes) else "-"


def _parse(chunks: list[bytes]) -> tuple[list, str | None]:
    parser = RequestParser()
    requests: list = []
    for chunk in chunks:
        requests += parser.feed(chunk)
    error = None
    if requests and isinstance(requests[-1], ProtocolError):
        error = str(requests.pop())
    return requests, error


def _cuts(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(data):
        step = rng.randint(1, 40) if rng.random() < 0.5 else rng.randint(1, 9000)
        chunks.append(data[i : i + step])
        i += step
    return chunks


@pytest.mark.parametrize(("data", "requests", "error"), CASES, ids=_case_id)
def test_framing_whole_bytewise_and_cut(data: bytes, requests: list, error: str | None) -> None:
    assert _parse([data]) == (requests, error)
    if len(data) < 2000:
        assert _parse([data[i : i + 1] for i in range(len(data))]) == (requests, error)
    for seed in range(3):
        assert _parse(_cuts(data, seed)) == (requests, error)


@pytest.mark.parametrize(
    ("data", "requests", "error"), [c for c in CASES if c[2] is None], ids=_case_id
)
def test_trailing_bytes_wait_for_the_rest(data: bytes, requests: list, error: None) -> None:
    parser = RequestParser()
    assert parser.feed(data + b"*2\r\n$4\r\nECHO\r\n$5\r\nhel") == requests
    assert parser.feed(b"lo\r\n") == [[b"ECHO", b"hello"]]


def test_a_long_pipeline_cut_anywhere_gives_every_request() -> None:
    requests = [[b"HSET", b"key:%d" % i, b"f", b"v" * (i % 70)] for i in range(400)]
    requests += [[b"ECHO", b"x" * 100_000]]
    data = b"".join(encode_request(*r) for r in requests) + PING
    for seed in range(5):
        assert _parse(_cuts(data, seed)) == (requests + [[b"PING"]], None)


def test_an_over_limit_bulk_is_refused_when_declared_not_after_buffering() -> None:
    parser = RequestParser()
    assert parser.feed(PING * 100 + b"*2\r\n$4\r\nECHO\r\n$1") == [[b"PING"]] * 100
    out = parser.feed(b"%d\r\n" % MAX_BULK + b"x" * 10)  # 512 MiB + 1 declared
    assert len(out) == 1 and str(out[0]) == "Protocol error: invalid bulk length"
    assert parser.feed(b"x" * 1000) == []  # nothing more is read after broken framing


def test_a_large_legal_bulk_arrives_in_pieces() -> None:
    parser = RequestParser()
    body = bytes(range(256)) * 4096  # 1 MiB, with CR, LF, '*' and '$' inside
    data = encode_request(b"ECHO", body)
    out: list = []
    for i in range(0, len(data), 65536):
        out += parser.feed(data[i : i + 65536])
    assert out == [[b"ECHO", body]]


def test_before_auth_the_limits_are_smaller_and_requests_come_one_at_a_time() -> None:
    parser = RequestParser()
    two = encode_request("AUTH", "pw") + encode_request("PING")
    assert parser.feed(two, authenticated=False) == [[b"AUTH", b"pw"]]
    assert parser.backlog
    assert parser.feed(b"", authenticated=True) == [[b"PING"]]
    assert not parser.backlog
    big = RequestParser().feed(encode_request(*["a"] * 11), authenticated=False)
    assert str(big[0]) == "Protocol error: unauthenticated multibulk length"
    bulk = RequestParser().feed(b"*1\r\n$16385\r\n", authenticated=False)
    assert str(bulk[0]) == "Protocol error: unauthenticated bulk length"
    ok = RequestParser().feed(encode_request("ECHO", "x" * 16384), authenticated=False)
    assert ok == [[b"ECHO", b"x" * 16384]]


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"", []),
        (b"   ", []),
        (b"a  b\tc", [b"a", b"b", b"c"]),
        (b'"" x', [b"", b"x"]),
        (b'"\\xZZ"', [b"xZZ"]),  # not hex: the backslash escapes the x
        (b'"\\q"', [b"q"]),
        (b'"a\\"', None),
        (b"'a", None),
        (b'"a"\x0b', [b"a"]),  # a closing quote may be followed by any isspace byte
    ],
)
def test_split_inline_is_sdssplitargs(line: bytes, args: list | None) -> None:
    assert split_inline(line) == args


@pytest.mark.parametrize(
    ("value", "resp2", "resp3"),
    [
        (b"x", b"$1\r\nx\r\n", b"$1\r\nx\r\n"),
        ("OK", b"+OK\r\n", b"+OK\r\n"),
        (7, b":7\r\n", b":7\r\n"),
        (None, b"$-1\r\n", b"_\r\n"),
        (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
        ([b"a", 1], b"*2\r\n$1\r\na\r\n:1\r\n", b"*2\r\n$1\r\na\r\n:1\r\n"),
        ({b"k": b"v"}, b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n", b"%1\r\n$1\r\nk\r\n$1\r\nv\r\n"),
        (Set(["a"]), b"*1\r\n+a\r\n", b"~1\r\n+a\r\n"),
        (Verbatim(b"t"), b"$1\r\nt\r\n", b"=5\r\ntxt:t\r\n"),
        (Raw(b"+X\r\n"), b"+X\r\n", b"+X\r\n"),
    ],
)
def test_encode(value: object, resp2: bytes, resp3: bytes) -> None:
    assert encode(value, 2) == resp2
    assert encode(value, 3) == resp3


@pytest.mark.parametrize("cut", [0, 3, 9])
def test_a_huge_argument_count_costs_nothing_until_the_arguments_come(cut: int) -> None:
    tracemalloc.start()
    try:
        parser = RequestParser()
        data = PING + b"*2000000000\r\n$4\r\nECHO\r\n"
        assert parser.feed(data[: len(PING) + cut]) == [[b"PING"]]
        assert parser.feed(data[len(PING) + cut :]) == []
        assert tracemalloc.get_traced_memory()[1] < 5_000_000
    finally:
        tracemalloc.stop()


def test_many_arguments_arrive_whole() -> None:
    args = [b"%d" % i for i in range(25_000)]
    data = PING + encode_request(*args) + PING
    for seed in range(2):
        assert _parse(_cuts(data, seed)) == ([[b"PING"], args, [b"PING"]], None)


PLAIN_GET = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"


@pytest.mark.parametrize("rest", [
    b"*02\r\n$3\r\nGET\r\n$1\r\nk\r\n",  # a count's leading zero
    b"*2\r\n$03\r\nGET\r\n$1\r\nk\r\n",  # a length's leading zero
    b"*2\n$3\r\nGET\r\n$1\r\nk\r\n",  # LF alone after the count
    b"*0\r\n", b"*-1\r\n", b"*+2\r\n",
    b"*10000\r\n",  # HIREDIS_MAX_ARGS: the guarded path's
    b"*2\r\n$3\r\nGET\r\n:1\r\n",  # not a bulk
    b"*2\r\n$3\r\nGET\r\n$1\r\n",  # the chunk ends inside the request
    b"*2\r\n$3\r\nGET",
    b"*",
    b"PING\r\n",  # inline
    b"x2\r\n$3\r\nGET\r\n$1\r\nk\r\n",  # not a `*`, however well framed the rest
    b"\r\n",
])
def test_the_plain_reader_leaves_anything_else_to_hiredis_at_its_start(rest: bytes) -> None:
    got: list = []
    assert _plain_requests(PLAIN_GET * 2 + rest, got) == 2 * len(PLAIN_GET)
    assert got == [[b"GET", b"k"]] * 2


def test_the_plain_reader_reads_empty_and_binary_arguments() -> None:
    data = encode_request(b"SET", b"", b"*2\r\n$1\r\n\x00") + encode_request(b"PING")
    got: list = []
    assert _plain_requests(data, got) == len(data)
    assert got == [[b"SET", b"", b"*2\r\n$1\r\n\x00"], [b"PING"]]


def test_what_the_plain_reader_leaves_gets_hirediss_answer() -> None:
    # A request cut short after plain ones: the rest waits, then comes whole.
    data = PLAIN_GET + encode_request(b"ECHO", b"x" * 300)
    parser = RequestParser()
    assert parser.feed(data[:-100]) == [[b"GET", b"k"]]
    assert parser.feed(data[-100:]) == [[b"ECHO", b"x" * 300]]


def test_the_two_bytes_after_a_bulk_are_skipped_unread_as_hiredis_and_redis_do() -> None:
    data = b"*1\r\n$3\r\nGETxx" + PLAIN_GET
    got: list = []
    assert _plain_requests(data, got) == len(data)
    parser = RequestParser()
    out: list = []
    parser._feed_fast(data, out)  # hiredis alone
    assert got == out == [[b"GET"], [b"GET", b"k"]]


@pytest.mark.parametrize("header", [b"*1\r\n>2000000000\r\n", b"*1\r\n~2000000000\r\n",
                                    PING + b">2000000000\r\n", PING + b"*1\r\n>20000000\r\n"])
def test_a_huge_resp3_aggregate_header_costs_nothing(header: bytes) -> None:
    # hiredis makes a push (`>`) or set (`~`) reply's whole list when it reads the header
    tracemalloc.start()
    try:
        out = RequestParser().feed(header)
        assert tracemalloc.get_traced_memory()[1] < 5_000_000
    finally:
        tracemalloc.stop()
    assert out and (out[-1] == [header[len(PING):-2]] if header.startswith(PING + b">")
                    else isinstance(out[-1], ProtocolError))


def test_a_request_complete_by_redis_rules_where_hiredis_waits_is_run() -> None:
    # `$4\r` and a byte other than `\n` ends a header for Redis (processMultibulkBuffer
    # skips the two bytes after the `\r`); hiredis waits for a CRLF that never comes.
    assert RequestParser().feed(b"*1\r\n$4\rXPINGxx") == [[b"PING"]]
    assert RequestParser().feed(b"*1\r\n$4\rXPINGxx" + PING) == [[b"PING"], [b"PING"]]
    parser = RequestParser()
    assert parser.feed(PING + b"*2\r\n$4\rXECHOxx$1\r\na") == [[b"PING"]]
    assert parser.feed(b"\r\n" + PING) == [[b"ECHO", b"a"], [b"PING"]]


@pytest.mark.parametrize("chunks", [
    [b"*1\r\n$4\r", b"xPING\r\n*10000\r\n"],
    [b"*2\r\n$4\r\nECHO\r\n$1\rX", b"axx*12345\r\n"],
])
def test_the_known_difference_beside_a_big_count_is_redis_error_not_a_crash(
        chunks: list[bytes]) -> None:
    # A header ended by `\r` and another byte in a request hiredis holds the start of
    # (docs/SERVER.md's known difference): the guard (Redis's rules) takes it, hiredis
    # does not. A big count later in the chunk used to let hiredis's own exception,
    # or its False for "still waiting" as a request, out of feed.
    parser = RequestParser()
    assert parser.feed(chunks[0]) == []
    out = parser.feed(chunks[1])
    assert len(out) == 1 and isinstance(out[0], ProtocolError)
    assert str(out[0]) == "Protocol error: invalid bulk length"


@pytest.mark.parametrize("element", [b"+5\r\n", b"=5\r\ntxt:a\r\n", b"(1\r\n"])
def test_an_element_that_is_not_a_bulk_is_refused_as_redis_does(element: bytes) -> None:
    out = RequestParser().feed(PING + b"*2\r\n$4\r\nECHO\r\n" + element)
    assert out[0] == [b"PING"]
    assert len(out) == 2 and isinstance(out[1], ProtocolError)
    assert str(out[1]) == f"Protocol error: expected '$', got '{chr(element[0])}'"


def test_plain_requests_read_first_leave_the_rest_of_the_chunk_on_its_old_path() -> None:
    # An argument like a big count sends the chunk down the slow path (Redis's rules),
    # which takes a header cut after its \r as Redis does; reading the plain request
    # before it must not hand the rest to hiredis instead.
    chunks = [b"*2\r\n$4\r\nECHO\r\n$6\r\n*10000\r\n*1\r\n$4\r", b"xPING\r\n"]
    for plain in (False, True):
        with patch.object(resp, "COMPILED", plain):
            parser = RequestParser()
            assert [r for chunk in chunks for r in parser.feed(chunk)] == [
                [b"ECHO", b"*10000"], [b"PING"]]


@pytest.mark.parametrize("argv", [
    [b"PING"], [b"HGETALL", b"emq:{q}:job:1"], [b"SET", b"k", b""],
    [b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"], [b"ECHO", b"\r\n$3\r\n" * 300],
])
def test_encode_request_writes_what_a_client_sends(argv: list[bytes]) -> None:
    """The cluster's own connections write commands with it: the bytes a client sends
    (tests' own encoder), which a RESP reader reads back as the same arguments."""
    data = resp.encode_request(argv)
    assert data == encode_request(*argv)
    parser = RequestParser()
    assert parser.feed(data) == [argv]
