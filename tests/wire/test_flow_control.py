"""A client that pipelines without reading cannot grow the server; maxclients refuses politely."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.support import RawClient, encode_request, start_emqd, start_redis
from tests.wire.compare import raw_exchange

MB = 1024 * 1024


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_pipelining_without_reading_keeps_server_memory_bounded() -> None:
    server = start_emqd()
    try:
        warm = RawClient(server.port)
        assert warm.command("PING") == b"+PONG\r\n"
        before = _rss_bytes(server.pid)
        flood = socket.create_connection(("127.0.0.1", server.port))
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        flood.settimeout(0.5)
        chunk = encode_request("PING") * 20_000  # 280 kB of requests, 140 kB of replies
        sent, stalls, deadline = 0, 0, time.monotonic() + 20
        while sent < 64 * MB and stalls < 4 and time.monotonic() < deadline:
            try:
                sent += flood.send(chunk)
            except TimeoutError:
                stalls += 1  # the server stopped reading: what we wanted to see
        grown = _rss_bytes(server.pid) - before
        assert stalls >= 1, f"the server read {sent} bytes without ever pushing back"
        assert grown < 40 * MB, f"server grew {grown} bytes after {sent} bytes of requests"
        assert warm.command("PING") == b"+PONG\r\n"  # others are still served
        flood.close()
        warm.close()
    finally:
        server.stop()


def test_the_flooding_client_gets_every_reply_once_it_reads() -> None:
    server = start_emqd()
    try:
        client = RawClient(server.port, timeout=10)
        count = 200_000
        client.send(encode_request("PING") * count)  # more than the socket buffers hold
        expected, got = b"+PONG\r\n" * count, b""
        while len(got) < len(expected):
            got += client.sock.recv(1 << 20)
        assert got == expected
        client.close()
    finally:
        server.stop()


# The slow reader of issue 12: 2,000 HGETALLs of a 220 kB hash in one write, never read.
BIG_FIELDS, BIG_VALUE, HGETALLS = 1000, b"v" * 200, 2000


def _big_hash(client: RawClient) -> bytes:
    """Builds `h` (about 220 kB of fields and values); its HGETALL reply."""
    for start in range(0, BIG_FIELDS, 100):
        pairs = [x for i in range(start, start + 100) for x in (b"f%04d" % i, BIG_VALUE)]
        client.command("HSET", "h", *pairs)
    reply = client.command("HGETALL", "h")
    assert len(reply) > 210_000
    return reply


def _read_replies(sock: socket.socket, reply: bytes, count: int) -> int:
    """Reads `count` replies that should each be `reply`; how many were."""
    sock.settimeout(10)
    buffer, matched = bytearray(), 0
    while matched < count:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= len(reply) and matched < count:
            assert buffer[: len(reply)] == reply, f"reply {matched} differs"
            del buffer[: len(reply)]
            matched += 1
    assert not buffer
    return matched


@pytest.mark.parametrize("policy", ["everysec", "always"])
def test_a_batch_of_big_replies_stops_when_the_client_does_not_read(
        tmp_path: Path, policy: str) -> None:
    """The requests arrive in one read; flow control between reads alone would run
    all 2,000 and hold 440 MB of replies. Under `always` the replies also wait for
    the log's fsync (an HSET leads the batch), which must stop the batch as well."""
    server = start_emqd("--appendonly", "yes", "--appendfsync", policy, dir=str(tmp_path))
    try:
        setup = RawClient(server.port)
        reply = _big_hash(setup)
        before = _rss_bytes(server.pid)
        # the kernel's default buffers: a few MB of replies wait in them, and it
        # reads at loopback speed once it does
        slow = socket.create_connection(("127.0.0.1", server.port))
        requests = encode_request("HSET", "x", "f", "v") + encode_request("HGETALL", "h") * HGETALLS
        assert len(requests) < 70_000
        slow.sendall(requests)
        time.sleep(1.0)  # what the server would do with them, it has done
        assert setup.command("PING") == b"+PONG\r\n"  # others are served meanwhile
        grown = _rss_bytes(server.pid) - before
        assert grown < 40 * MB, f"server grew {grown} bytes for a client that does not read"
        assert slow.recv(4) == b":1\r\n"  # now it reads: every reply, in order
        assert _read_replies(slow, reply, HGETALLS) == HGETALLS
        assert setup.command("INFO", "stats").count(
            b"client_output_buffer_limit_disconnections:0") == 1
        slow.close()
        setup.close()
    finally:
        server.stop()


def test_a_normal_client_past_the_hard_limit_is_closed_logged_and_counted() -> None:
    server = start_emqd()
    try:
        setup = RawClient(server.port)
        for i in range(40):  # one HGETALL: about 2.6 MB
            setup.command("HSET", "big", f"f{i}", b"v" * 65536)
        assert setup.command("CONFIG", "SET", "client-output-buffer-limit",
                             "normal 1mb 0 0") == b"+OK\r\n"
        assert b"normal 1048576 0 0" in setup.command("CONFIG", "GET", "client-output-buffer-limit")
        reply_bytes = len(setup.command("HGETALL", "big"))
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(encode_request("CLIENT", "SETNAME", "sloth")
                     + encode_request("HGETALL", "big") * 20)
        deadline = time.monotonic() + 10
        stats = b""
        while time.monotonic() < deadline:
            stats = setup.command("INFO", "stats")
            if b"client_output_buffer_limit_disconnections:1" in stats:
                break
            time.sleep(0.05)
        assert b"client_output_buffer_limit_disconnections:1" in stats
        assert b"name=sloth" not in setup.command("CLIENT", "LIST")
        # what the kernels' buffers held arrives, then the end: far less than 20 replies
        slow.settimeout(5)
        received, ended = 0, False
        deadline = time.monotonic() + 10
        while not ended and time.monotonic() < deadline:
            chunk = slow.recv(1 << 20)
            received += len(chunk)
            ended = not chunk
        assert ended and received < 10 * reply_bytes
        assert setup.command("PING") == b"+PONG\r\n"
        slow.close()
        setup.close()
    finally:
        server.stop()
    assert ("name=sloth closed for overcoming of output buffer limits (normal"
            in server.output())


def _client_with_room(port: int) -> RawClient:
    """A client that got a seat: the start-up probe's connection may still hold one
    for a moment after it closed, so a refused connection is retried (bounded)."""
    deadline = time.monotonic() + 5.0
    while True:
        client = RawClient(port)
        reply = client.command("PING")
        if reply == b"+PONG\r\n":
            return client
        client.close()
        assert time.monotonic() < deadline, reply
        time.sleep(0.02)


def test_maxclients_refuses_like_redis() -> None:
    servers = [start_emqd("--maxclients", "2"), start_redis("--maxclients", "2")]
    try:
        answers = []
        for server in servers:
            first, second = _client_with_room(server.port), _client_with_room(server.port)
            answers.append(raw_exchange(server.port, encode_request("PING")))
            first.close()
            second.close()
        assert answers[0] == answers[1] == (b"-ERR max number of clients reached\r\n", True)
    finally:
        for server in servers:
            server.stop()
