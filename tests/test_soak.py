"""Soak: every kind of refusal, pipelined at a real server for a while; its RSS must come back.

Every refusal used to keep its traceback, and with it the frames and argv it
passed (issue 12, finding 1): 100,000 stale COMPLETEs grew a server from 240
to 645 MiB, a refused 100 MB payload cost 205 MB. Here a server with a small
`--max-payload` and a password gets, over three connections, a mix of
EMQSTALE (gone, not active, token mismatch), bad arguments, WRONGTYPE,
unknown commands and subcommands, wrong arity, syntax errors, EXECABORT,
NOAUTH, refused FUNCTION LOADs, payloads over max-payload (a few MiB each),
and connections closed on broken framing. Each batch must be answered with
the same bytes every time, nothing but refusals (and MULTI's OK/QUEUED);
after a warm-up round the server's VmRSS is the baseline, and after the soak
it must be back within a few MiB of it.

Bounded: `--soak-seconds` (default 3, or $EMQD_SOAK_SECONDS) and
`--soak-refusals` (default 1,000,000, or $EMQD_SOAK_REFUSALS), whichever ends
first; `pytest tests/test_soak.py --soak-seconds 900` runs the million.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import RawClient, ServerProcess, encode_request, start_emqd

pytestmark = pytest.mark.slow

PASSWORD = "soak-pw"
MAX_PAYLOAD = 64 * 1024
BIG_PAYLOAD = 4 * 1024 * 1024  # 64 times max-payload, refused after it was all read
RSS_SLACK_KB = 24 * 1024  # allocator pools and caches; the old leak grew ~4 KB per refusal


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def soak_bounds(config: pytest.Config) -> tuple[float, int]:
    seconds = config.getoption("--soak-seconds") or float(
        os.environ.get("EMQD_SOAK_SECONDS", "3"))
    refusals = config.getoption("--soak-refusals") or int(
        os.environ.get("EMQD_SOAK_REFUSALS", "1000000"))
    return seconds, refusals


# Requests that set the scene: job 1 completed, job 2 held by a long lease.
SCENE = [
    ("EMQ.ADD", "q", "p"), ("EMQ.CLAIM", "q", "30000"), ("EMQ.COMPLETE", "q", "1", "1"),
    ("EMQ.ADD", "q", "p2"), ("EMQ.CLAIM", "q", "600000"),
    ("ZADD", "z", "1", "a"), ("HSET", "h", "f", "v"), ("HSET", "emq:{w}:pending", "f", "v"),
]

# One batch of refusals for an authenticated connection.
REFUSALS = [
    ("EMQ.COMPLETE", "q", "1", "1"),  # EMQSTALE job not active
    ("EMQ.COMPLETE", "q", "999", "1"),  # EMQSTALE job gone
    ("EMQ.COMPLETE", "q", "2", "7"),  # EMQSTALE token mismatch
    ("EMQ.EXTEND", "q", "2", "9", "1000"),
    ("EMQ.FAIL", "q", "2", "9", "ERROR", "x" * 200),
    ("EMQ.REQUEUE", "q", "2", "9"),
    ("EMQ.REVIVE", "q", "2"),  # EMQSTATE
    ("EMQ.ADD", "q", "x", "PRIORITY", "abc"),
    ("EMQ.ADD", "q", "x", "DELAY", "1", "AT", "2"),
    ("EMQ.ADD", "q", "x", "BACKOFF", "sometimes"),
    ("EMQ.ADD", "q{", "x"),
    ("EMQ.CLAIM", "q", "-1"),
    ("EMQ.CONFIG", "q", "SET", "max_attempts", "0"),
    ("EMQ.CONFIG", "q", "SET", "colour", "blue"),
    ("EMQ.ADD", "q", "y" * (MAX_PAYLOAD + 1)),  # just over max-payload
    ("HINCRBY", "h", "f", "x"),
    ("HGET", "z", "f"),  # WRONGTYPE
    ("ZADD", "h", "1", "a"),
    ("EMQ.CLAIM", "w", "1000"),  # WRONGTYPE inside a verb
    ("ZADD", "z", "XX", "NX", "1", "a"),
    ("ZRANGEBYSCORE", "z", "x", "y"),
    ("NOSUCH", "a", "b" * 100),
    ("GET", "k"),
    ("CLIENT", "NOPE"),
    ("CONFIG", "SET", "a", "b"),
    ("HSET", "h"),  # wrong arity
    ("EMQ.ADD",),
    ("SELECT", "1"),
    ("AUTH", "wrong"),  # WRONGPASS: the connection stays logged in
    ("FUNCTION", "LOAD", "#!lua name=x\nreturn 1"),
    ("FCALL", "f", "0"),
    ("MULTI",), ("HSET", "h"), ("EXEC",),  # EXECABORT
    ("EXEC",), ("DISCARD",),
]
UNAUTHENTICATED = [("PING",), ("EMQ.ADD", "q", "x"), ("HGETALL", "h"), ("AUTH", "nope"),
                   ("NOSUCH",)] * 8
BROKEN_FRAMING = [b"*1\r\n$x\r\n", b"*2\r\n$4\r\nECHO\r\n:1\r\n", b'ECHO "a\r\n']


class Pipe:
    """One connection that sends a batch in one write and reads its whole answer."""

    def __init__(self, port: int, requests: list[tuple[str, ...]], login: bool) -> None:
        self.client = RawClient(port, timeout=30)
        if login:
            assert self.client.command("AUTH", PASSWORD) == b"+OK\r\n"
        self.batch = b"".join(encode_request(*request) for request in requests)
        self.lines = len(requests)  # every answer here is one line
        self.answer: bytes | None = None

    def round(self) -> None:
        self.client.send(self.batch)
        data = self.client.buffer
        while data.count(b"\r\n") < self.lines:
            chunk = self.client.sock.recv(1 << 20)
            assert chunk, "the server closed the connection"
            data += chunk
        self.client.buffer = b""
        assert data.count(b"\r\n") == self.lines, data[-200:]
        if self.answer is None:
            lines = data.split(b"\r\n")[:-1]
            assert all(line[:1] == b"-" or line in (b"+OK", b"+QUEUED") for line in lines), lines
            self.answer = data
        assert data == self.answer  # the same refusals, byte for byte, every time

    def close(self) -> None:
        self.client.close()


def big_payloads(port: int, count: int) -> int:
    """EMQ.ADDs of BIG_PAYLOAD bytes each, refused; the refusals sent."""
    pipe = Pipe(port, [("EMQ.ADD", "q", "z" * BIG_PAYLOAD)] * count, login=True)
    try:
        pipe.round()
        assert pipe.answer == b"-ERR payload exceeds max-payload\r\n" * count
    finally:
        pipe.close()
    return count


def broken_connections(port: int) -> int:
    for data in BROKEN_FRAMING:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(encode_request("AUTH", PASSWORD) + data)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            assert answer.startswith(b"+OK\r\n-ERR Protocol error: "), answer
    return len(BROKEN_FRAMING)


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    server = start_emqd("--requirepass", PASSWORD, "--max-payload", str(MAX_PAYLOAD))
    try:
        scene = RawClient(server.port)
        scene.command("AUTH", PASSWORD)
        for request in SCENE:
            assert not scene.command(*request).startswith(b"-"), request
        scene.close()
        yield server
    finally:
        server.stop()


def test_rss_comes_back_after_every_kind_of_refusal(server: ServerProcess,
                                                    request: pytest.FixtureRequest) -> None:
    seconds, limit = soak_bounds(request.config)
    pipes = [Pipe(server.port, REFUSALS * 10, login=True),
             Pipe(server.port, REFUSALS * 10, login=True),
             Pipe(server.port, UNAUTHENTICATED, login=False)]
    try:
        def one_round() -> int:
            for pipe in pipes:
                pipe.round()
            return sum(pipe.lines for pipe in pipes) + broken_connections(server.port)

        refused = 0
        for _ in range(20):  # warm-up: every path once, the allocator's pools filled
            refused += one_round()
        refused += big_payloads(server.port, 4)
        baseline = rss_kb(server.pid)

        deadline = time.monotonic() + seconds
        rounds = 0
        while time.monotonic() < deadline and refused < limit:
            refused += one_round()
            rounds += 1
            if rounds % 200 == 0:
                refused += big_payloads(server.port, 2)
        refused += big_payloads(server.port, 4)
        after = rss_kb(server.pid)
    finally:
        for pipe in pipes:
            pipe.close()

    print(f"\nsoak: {refused} refusals in {seconds:.0f} s at most; "
          f"VmRSS {baseline} kB -> {after} kB")
    assert refused > 20_000  # enough for the old leak to show (~4 KB each)
    assert after - baseline < RSS_SLACK_KB, (baseline, after, refused)
    after_all = RawClient(server.port)
    try:  # and the server still serves
        assert after_all.command("AUTH", PASSWORD) == b"+OK\r\n"
        assert after_all.command("EMQ.STATS", "q").startswith(b"*")
    finally:
        after_all.close()
