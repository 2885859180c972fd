"""Differential helpers: the same raw requests to emqd and to the reference Redis."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterable, Sequence

from tests.support import RawClient


def same_replies(emqd_port: int, redis_port: int, requests: Iterable[Sequence[bytes | str | int]],
                 resp: int = 2) -> None:
    """Send each request over one connection per server; assert identical reply bytes.

    With `resp=3` both connections say `HELLO 3` first (its reply, which
    names each server's version and client id, is not compared)."""
    ours, theirs = RawClient(emqd_port), RawClient(redis_port)
    try:
        if resp == 3:
            ours.command("HELLO", 3)
            theirs.command("HELLO", 3)
        for request in requests:
            expected = theirs.command(*request)
            assert ours.command(*request) == expected, request
    finally:
        ours.close()
        theirs.close()


def raw_exchange(port: int, data: bytes, quiet_s: float = 0.3) -> tuple[bytes, bool]:
    """Send raw bytes; the bytes answered until the server is quiet, and whether it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=quiet_s) as sock:
        sock.sendall(data)
        return read_until_quiet(sock, quiet_s)


def read_until_quiet(sock: socket.socket, quiet_s: float) -> tuple[bytes, bool]:
    """The bytes answered until the server is quiet for `quiet_s`, and whether it closed;
    a server still talking after 10 s fails the test."""
    sock.settimeout(quiet_s)
    answer = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            return answer, False
        except ConnectionResetError:
            return answer, True
        if not chunk:
            return answer, True
        answer += chunk
    raise AssertionError("the server kept talking for 10 s")


_VOLATILE = re.compile(rb"(?<=[:=])[0-9]+")


def shape(reply: bytes) -> bytes:
    """A reply with its numbers blanked: compares ids and times by structure."""
    return _VOLATILE.sub(b"#", reply)
