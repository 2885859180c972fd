"""Messages reach real clients; a subscriber that does not read is closed at its limit.

The limits are Redis's `client-output-buffer-limit pubsub` (32 MB hard, 8 MB
soft for 60 s), made small here through emqd's flags (or CONFIG SET) so that
the kernel's socket buffers are the bigger part of what a lagging subscriber
holds.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis

from tests.support import RawClient, encode_request, start_emqd

MESSAGE = b"m" * 65536
FRAME = len(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$65536\r\n\r\n") + len(MESSAGE)
MB = 1024 * 1024


def _lagging_subscriber(port: int) -> socket.socket:
    """Subscribed to `c`, with a tiny receive buffer, and never reading again."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(encode_request("SUBSCRIBE", "c"))
    assert sock.recv(100) == b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n"
    return sock


def _info_stats(port: int) -> dict:
    with redis.Redis(port=port) as client:
        return client.info("stats")


def _publish_until_alone(publisher: RawClient, expected: int, budget: int) -> int:
    """Publish on `c` until fewer than `expected` receive it; the messages it took."""
    for sent in range(1, budget + 1):
        if publisher.command("PUBLISH", "c", MESSAGE) != b":%d\r\n" % expected:
            return sent
    raise AssertionError(f"still {expected} receivers after {budget} messages")


class Reader(threading.Thread):
    """A subscriber that keeps up: reads everything until told to stop (or 30 s)."""

    def __init__(self, client: RawClient) -> None:
        super().__init__(daemon=True)
        self.client, self.received, self.stop = client, bytearray(), threading.Event()
        client.sock.settimeout(0.1)

    def run(self) -> None:
        deadline = time.monotonic() + 30
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.received.extend(self.client.sock.recv(1 << 20))
            except TimeoutError:
                pass

    def wait_for(self, size: int) -> bytes:
        deadline = time.monotonic() + 20
        while len(self.received) < size and time.monotonic() < deadline:
            time.sleep(0.01)
        self.stop.set()
        self.join(timeout=5)
        return bytes(self.received)


def _read_to_the_end(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def test_a_subscriber_that_does_not_read_is_closed_at_the_hard_limit() -> None:
    server = start_emqd("--pubsub-hard-limit", str(MB), "--pubsub-soft-limit", "0")
    try:
        healthy = RawClient(server.port)
        healthy.command("SUBSCRIBE", "c")
        reader = Reader(healthy)
        reader.start()
        slow = _lagging_subscriber(server.port)
        publisher, other = RawClient(server.port), RawClient(server.port)
        started = time.monotonic()
        sent = _publish_until_alone(publisher, 2, 1000)  # 64 MB at most
        assert other.command("PING") == b"+PONG\r\n"
        elapsed = time.monotonic() - started
        # What the lagging client cost: its socket buffers, plus at most the limit.
        assert sent * len(MESSAGE) < 24 * MB, sent
        assert elapsed < 15, f"{sent} publishes took {elapsed:.1f}s"
        assert _info_stats(server.port)["client_output_buffer_limit_disconnections"] == 1
        assert publisher.command("PUBSUB", "NUMSUB", "c") == b"*2\r\n$1\r\nc\r\n:1\r\n"
        # The lagging one gets what the kernel already held, then the end (the rest is dropped);
        # the one that kept up got every message.
        assert len(_read_to_the_end(slow)) < (sent - 1) * FRAME
        assert reader.wait_for(sent * FRAME) == (b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$65536\r\n"
                                                 + MESSAGE + b"\r\n") * sent
        for client in (healthy, publisher, other):
            client.close()
        slow.close()
    finally:
        server.stop()
    assert "closed for overcoming of output buffer limits (pubsub" in server.output()


def test_a_subscriber_over_the_soft_limit_is_closed_after_its_seconds() -> None:
    server = start_emqd("--pubsub-hard-limit", "0", "--pubsub-soft-limit", str(64 * 1024),
                        "--pubsub-soft-seconds", "3")
    try:
        slow = _lagging_subscriber(server.port)
        publisher = RawClient(server.port)
        flood_started = time.monotonic()
        # 8 MB: more than the socket buffers hold, so megabytes stay unsent, far over
        # the soft limit: the clock starts, and nothing is closed yet.
        replies = {publisher.command("PUBLISH", "c", MESSAGE) for _ in range(128)}
        assert replies == {b":1\r\n"}
        assert publisher.command("PUBLISH", "c", b"x") == b":1\r\n"
        assert time.monotonic() - flood_started < 3, "too slow to tell the soft limit's seconds"
        time.sleep(max(0.0, flood_started + 3.5 - time.monotonic()))
        sent = _publish_until_alone(publisher, 1, 100)  # the next message finds it lagging
        assert sent <= 2
        assert _info_stats(server.port)["client_output_buffer_limit_disconnections"] == 1
        publisher.close()
        slow.close()
    finally:
        server.stop()


def test_config_set_changes_the_limit_for_the_next_message() -> None:
    """Started with the default 32 MB, lowered by CONFIG SET: the lagging subscriber is
    closed within a few MB; CONFIG RESETSTAT then zeroes the count of closed clients."""
    server = start_emqd()
    try:
        slow = _lagging_subscriber(server.port)
        publisher = RawClient(server.port)
        assert publisher.command("CONFIG", "SET", "client-output-buffer-limit",
                                 "pubsub 1mb 0 0") == b"+OK\r\n"
        sent = _publish_until_alone(publisher, 1, 1000)
        assert sent * len(MESSAGE) < 24 * MB, sent
        assert _info_stats(server.port)["client_output_buffer_limit_disconnections"] == 1
        assert publisher.command("CONFIG", "RESETSTAT") == b"+OK\r\n"
        assert _info_stats(server.port)["client_output_buffer_limit_disconnections"] == 0
        publisher.close()
        slow.close()
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_subscribes_and_receives(emqd_port: int, protocol: int) -> None:
    with redis.Redis(port=emqd_port, protocol=protocol) as client:
        listener = client.pubsub()
        listener.subscribe("news")
        listener.psubscribe("n*")
        got = []
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            message = listener.get_message(timeout=0.1)
            if message is not None:
                got.append((message["type"], message["channel"]))
        assert got == [("subscribe", b"news"), ("psubscribe", b"n*")]
        assert client.publish("news", "hello") == 2
        messages = []
        while len(messages) < 2 and time.monotonic() < deadline:
            message = listener.get_message(timeout=0.1)
            if message is not None:
                messages.append((message["type"], message["pattern"], message["data"]))
        assert sorted(messages, key=str) == [("message", None, b"hello"),
                                             ("pmessage", b"n*", b"hello")]
        assert client.pubsub_numsub("news") == [(b"news", 1)]
        listener.close()
