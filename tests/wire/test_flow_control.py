"""A client that pipelines without reading cannot grow the server; maxclients refuses politely."""

from __future__ import annotations

import socket
import time

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
