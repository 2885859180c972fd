"""emqd/http/gate.py over the wire: a slow request head is answered 408 and closed, the HTTP
side's connections have their own cap (503 past it), and under a low `ulimit -n` slow
HTTP clients cannot take the queue port's clients' descriptors."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support import RawClient, start_emqd

pytestmark = pytest.mark.slow

PARTIAL = b"GET / HTTP/1.1\r\nHost: x\r\n"  # no blank line: the head never ends


def everything(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def get_metrics(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return everything(sock)


def test_a_head_that_does_not_arrive_in_time_is_answered_408_and_closed() -> None:
    server = start_emqd("--http-head-timeout-ms", "300", http=True)
    try:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(PARTIAL)
            reply = everything(sock)
            took = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b"--http-head-timeout-ms" in reply
        assert 0.25 < took < 3
        assert get_metrics(server.http_port).startswith(b"HTTP/1.1 200 OK")  # heads in time pass
    finally:
        server.stop()


def test_the_http_side_has_its_own_cap_and_the_queue_port_does_not_notice() -> None:
    server = start_emqd("--http-maxclients", "3", http=True)
    slow: list[socket.socket] = []
    try:
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
            sock.sendall(PARTIAL)
            slow.append(sock)
        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as extra:
            reply = everything(extra)
        assert reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        client = RawClient(server.port)
        assert client.command("PING") == b"+PONG\r\n"
        client.close()
        slow.pop().close()
        time.sleep(0.1)
        assert get_metrics(server.http_port).startswith(b"HTTP/1.1 200 OK")
    finally:
        for sock in slow:
            sock.close()
        server.stop()


def test_three_hundred_slow_http_clients_under_a_low_ulimit_leave_the_queue_port_serving() -> None:
    """The issue's case: 300 partial heads under `ulimit -n 256` left the RESP port refusing."""
    server = start_emqd(http=True, open_files=256)  # maxclients: 256 - 32 - 64 = 160
    slow: list[socket.socket] = []
    clients: list[RawClient] = []
    try:
        for _ in range(300):
            try:
                sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
                sock.sendall(PARTIAL)
            except OSError:
                continue  # refused and closed already (503): nothing to keep
            slow.append(sock)
        time.sleep(0.2)
        for _ in range(160):
            client = RawClient(server.port)
            clients.append(client)
            assert client.command("PING") == b"+PONG\r\n"
        assert clients[0].command("CONFIG", "GET", "maxclients").endswith(b"$3\r\n160\r\n")
    finally:
        for sock in slow:
            sock.close()
        for client in clients:
            client.close()
        server.stop()
