"""Raw bytes to emqd and to redis-server 7.0: the same answer, and the same close."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support import RawClient
from tests.wire.compare import raw_exchange, read_until_quiet
from tests.wire.test_resp import PING

ECHO_BIG_COUNT = b"*2\r\n$4\r\nECHO\r\n$6\r\n*10000\r\n"  # an argument that looks like a header

FRAMING = [
    b"*abc\r\n",
    b"*1048577\r\n",
    b"*2147483648\r\n",
    b"*1\r\n$abc\r\n",
    b"*1\r\n$-5\r\n",
    b"*1\r\n$-1\r\n",
    b"*1\r\n$536870913\r\n",
    b"*1\r\n$536870912\r\n",
    b"*2\r\n$4\r\nECHO\r\n:1\r\n",
    b"*1\r\nPING\r\n",
    b"*2\r\n$1\r\na\r\n\r\n",
    b'ECHO "abc\r\n',
    b'ECHO "a"b\r\n',
    b"A" * 70000,
    b"*1" + b"1" * 70000,
    b"*1\r\n$" + b"1" * 70000,
    b"\r\n\r\n" + PING,
    b"*0\r\n*-1\r\n*-5\r\n" + PING,
    b"*1\r\n$4\r\nPINGxx\r\n",
    PING + b"\r\n\r\n" + PING,
    PING + b"+PING\r\n",
    b"*1\r\n$0\r\n\r\n",
    b"*01\r\n" + PING,
    b'ECHO "\\x41\\n" \'it\\\'s\'\r\nPING\n',
    PING * 3 + b"*1\r\n$4\r\nPI",
    PING + b"-\n",  # an inline line after a request, ended by LF alone (found by the fuzz test)
    PING + b"-x\n" + PING + b"$5\n:1\n",
    # pipelined inline lines, taken in one pass unless a line needs Redis's finer rules
    b"PING\r\nECHO a\r\n\r\n  ECHO  b\tc \r\nPING\rx\r\nECHO",
    b'PING\r\nECHO "q u"\r\nECHO x\r\n',
    b"PING\r\nECHO a\vb\r\nECHO c\fd\r\nPING\n",
    b"PING\r\nECHO a\x00b\r\nPING\r\n",
    b"ECHO *\r\nPING\r\n*1\r\n$4\r\nPING\r\nECHO z\r\n",
    # elements hiredis-py returns as bytes like a bulk, which Redis refuses
    b"*1\r\n+5\r\n",
    PING + b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n",
    PING + b"*2\r\n$4\r\nECHO\r\n(1\r\n",
    ECHO_BIG_COUNT + b"*1\r\n+5\r\n",
    # ... after a bulk whose two closing bytes are not CRLF (skipped unread)
    b"*2\r\n$4\r\nECHOXY+x\r\n",
    PING + b"*2\r\n$4\r\nECHOXY(12\r\n" + PING,
    b"*2\r\n$4\r\nECHOXY=5\r\ntxt:a\r\n*2\r\n$4\r\nECHO\r\n$12\r\n\r\nFLUSHALL\r\n\r\n:1\r\n",
    # RESP3 aggregates hiredis would allocate for
    b"*1\r\n>100000000\r\n",
    b"*1\r\n~100000000\r\n",
    PING + b">10000000\r\n",
    PING + b"*1\r\n%1\r\n*0\r\n:1\r\n",
    PING + b"~1\r\n$0\r\n\r\n",
    PING + b">2\r\n$1\r\na\r\n$1\r\nb\r\n",
    # a header ended by \r and another byte, which Redis skips: whole where hiredis waits
    b"*1\r\n$4\rXPINGxx",
    b"*1\r\n$4\rXPINGxx" + PING,
]


@pytest.mark.parametrize("data", FRAMING, ids=lambda d: repr(d)[:40])
def test_framing_answers_like_redis(data: bytes, emqd_port: int, redis_ref: int) -> None:
    assert raw_exchange(emqd_port, data) == raw_exchange(redis_ref, data)


def _exchange_in_chunks(port: int, chunks: list[bytes]) -> tuple[bytes, bool]:
    """Send each chunk as its own read (a pause between them); what comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=0.3) as sock:
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(0.05)
        return read_until_quiet(sock, 0.3)


@pytest.mark.parametrize("chunks", [
    # plain requests first, then a header cut after its \r: the slow path's reading,
    # because the chunk holds something that looks like a big count (as before the
    # compiled core read plain requests itself)
    [ECHO_BIG_COUNT + b"*1\r\n$4\r", b"xPING\r\n"],
    [ECHO_BIG_COUNT + b"*1\r\n$4\r", b"xPING\r\n*10000\r\n"],
    [PING + b"*1\r\n$4\r\nPI", b"NG\r\n" + PING],
    # a non-bulk element read after hiredis held the request's start
    [b"*3\r\n$4\r\nECHO\r\n$1\r\n", b"aXY+x\r\n$1\r\nb\r\n" + PING],
    [b"*2\r\n$4\r\nECHOXY+x\r\n*2\r\n$4\r\nECHO\r\n$40\r\nhello\r\nFLUSHALL\r\n",
     b"rest-of-the-forty-byte-value\r\n"],
], ids=lambda c: repr(c)[:40])
def test_chunked_framing_answers_like_redis(chunks: list[bytes], emqd_port: int,
                                            redis_ref: int) -> None:
    assert _exchange_in_chunks(emqd_port, chunks) == _exchange_in_chunks(redis_ref, chunks)


UNKNOWN = [
    [b"GET", b"k"],
    [b"SET", b"k", b"v"],
    [b"LPUSH", b"l", b"a"],
    [b"EVAL", b"return 1", b"0"],
    [b"nosuch"],
    [b"nosuch", b"a\r\nb", b"c\x00d"],
    [b"no\x00such", b"x"],
    [b"nosuch", b"x" * 200],
    [b"nosuch", b"x" * 100, b"y" * 100, b"z"],
    [b"y" * 200, b"a"],
    [b"WATCH", b"k"],
]


REDIS_HAS = {b"GET", b"SET", b"LPUSH", b"EVAL", b"WATCH"}


@pytest.mark.parametrize("argv", UNKNOWN, ids=lambda a: repr(a)[:30])
def test_unknown_commands_answer_like_redis(
        argv: list[bytes], emqd_port: int, redis_ref: int) -> None:
    """Redis knows GET or EVAL, so it is asked about an unknown name, put back after."""
    alias = b"not-a-command-" + argv[0][:100]
    known = argv[0] in REDIS_HAS
    ref, ours = RawClient(redis_ref), RawClient(emqd_port)
    try:
        expected = ref.command(alias if known else argv[0], *argv[1:])
        expected = expected.replace(b"'" + alias + b"'", b"'" + argv[0] + b"'", 1)
        assert expected.startswith(b"-ERR unknown command '")
        assert ours.command(*argv) == expected
    finally:
        ref.close()
        ours.close()


def test_requirepass_framing_limits_like_redis(emqd_auth: int, redis_auth: int) -> None:
    for data in (
        b"*11\r\n",
        b"*10\r\n",
        b"*1\r\n$16385\r\n",
        b"*1\r\n$16384\r\n",
        b"*2\r\n$4\r\nAUTH\r\n$6\r\nsekret\r\n*11\r\n" + b"$1\r\na\r\n" * 11,
        b"*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n*11\r\n",
    ):
        assert raw_exchange(emqd_auth, data) == raw_exchange(redis_auth, data), data
