"""A big value costs about its size (issue 15): one big HSET, or an EMQ.ADD of a payload at
max-payload, with the log on, peaks the server under about twice the value.

The server's peak is its VmHWM, less its resident size before the request. What may
be held at once: the request as hiredis reads it, the value it makes of it (then the
reader's buffer is freed), and the log record, written from the stored value itself.
Before, the record was formatted and joined (two copies more: a peak of 4x), and the
reader's buffer stayed until the connection's next request. The value is read back
after a restart, so the record that was never copied is the real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from emqd.config import Config
from tests.support import RawClient, encode_request, start_emqd

MIB = 1 << 20
MAX_PEAK = 2.4  # times the value: 2 in principle, and some slack for the allocator


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def big_request(name: str, head: list[bytes], value: bytes) -> bytes:
    """`name head... value` with the value's bulk header written by hand (it is big)."""
    prefix = encode_request(name, *head)
    count = len(head) + 2
    return b"*%d" % count + prefix[prefix.index(b"\r\n"):] + b"$%d\r\n" % len(value)


@pytest.mark.parametrize(("command", "size", "reply"), [
    ("HSET", 64 * MIB, b":1\r\n"),
    ("EMQ.ADD", Config().max_payload, b"$1\r\n1\r\n"),
])
def test_a_big_value_peaks_under_about_twice_its_size(tmp_path: Path, command: str, size: int,
                                                      reply: bytes) -> None:
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        client = RawClient(server.port, timeout=60)
        assert client.command("PING") == b"+PONG\r\n"
        before_kib = status_kib(server.pid, "VmRSS")
        value = bytes(size)
        head = [b"h", b"f"] if command == "HSET" else [b"q"]
        client.sock.sendall(big_request(command, head, value))
        client.sock.sendall(value)
        client.sock.sendall(b"\r\n")
        assert client.read_reply() == reply
        peak = (status_kib(server.pid, "VmHWM") - before_kib) * 1024 / size
        assert peak < MAX_PEAK, f"{command} of {size >> 20} MiB peaked at {peak:.2f}x its size"
        client.close()
    finally:
        assert server.stop() == 0
    again = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        client = RawClient(again.port, timeout=60)
        key = "h" if command == "HSET" else "emq:{q}:job:1"
        field = "f" if command == "HSET" else "payload"
        assert client.command("HSTRLEN", key, field) == b":%d\r\n" % size
        client.close()
    finally:
        again.stop()
