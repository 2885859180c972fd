"""Scripted conversations over several connections, to compare Pub/Sub streams with Redis.

A script is a list of steps `(connection, request)`, run in order; a step's
request may be a list of requests, sent pipelined. Each step waits until the
acting connection has received at least one complete frame per request sent
(so the server has run them before the next step is sent: the order in
which the server runs the steps, hence the order of each connection's
stream, is the script's), then collects what every connection received
until all are briefly quiet. The result is each connection's whole byte
stream, messages and replies interleaved as they arrived, with `<EOF>` where
the server closed it.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Sequence

from tests.support import encode_request, reply_length

QUIET_S = 0.01  # after a step's replies, what else arrives within this is collected
END_QUIET_S = 0.1  # after the last step, the same, with more patience
REPLY_TIMEOUT_S = 5.0
EOF = b"<EOF>"

Request = Sequence[bytes | str | int]
Step = tuple[int, Request | list[Request]]


def converse(port: int, script: Sequence[Step], connections: int = 2) -> list[bytes]:
    """Run `script` against the server on `port`; each connection's received bytes."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S)
             for _ in range(connections)]
    streams = [b""] * connections
    alive = [True] * connections
    try:
        for index, step in script:
            requests = step if isinstance(step, list) else [step]
            before = len(streams[index])
            socks[index].sendall(b"".join(encode_request(*request) for request in requests))
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while _complete_frames(streams[index][before:]) < len(requests):
                assert alive[index], f"connection {index} closed before its replies"
                assert time.monotonic() < deadline, f"connection {index}: no reply to {step!r}"
                _receive(socks, alive, streams, timeout=0.1)
            while _receive(socks, alive, streams, timeout=QUIET_S):
                pass
        while _receive(socks, alive, streams, timeout=END_QUIET_S):
            pass
        return streams
    finally:
        for index, sock in enumerate(socks):
            if alive[index]:
                sock.close()


def _receive(socks: list[socket.socket], alive: list[bool], streams: list[bytes],
             timeout: float) -> bool:
    """Read what is there (waiting up to `timeout`); False when nothing came."""
    live = [sock for sock, up in zip(socks, alive, strict=True) if up]
    readable, _, _ = select.select(live, [], [], timeout) if live else ([], [], [])
    for sock in readable:
        index = socks.index(sock)
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        if chunk:
            streams[index] += chunk
        else:
            streams[index] += EOF
            alive[index] = False
            sock.close()
    return bool(readable)


def _complete_frames(data: bytes) -> int:
    count = 0
    while data:
        if data.startswith(EOF):
            return count + 1
        end = reply_length(data)
        if end is None:
            return count
        count += 1
        data = data[end:]
    return count


def frames(stream: bytes) -> list[bytes]:
    """A stream cut into its top-level RESP frames (a trailing `<EOF>` kept as one)."""
    cut: list[bytes] = []
    while stream:
        if stream == EOF:
            return [*cut, EOF]
        end = reply_length(stream)
        assert end is not None, f"an unfinished frame: {stream[:80]!r}"
        cut.append(stream[:end])
        stream = stream[end:]
    return cut
