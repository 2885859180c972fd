"""Random request streams, cut at random places, answered exactly as redis-server answers them."""

from __future__ import annotations

import random
import socket
import time

import pytest

from tests.support import encode_request
from tests.wire.compare import raw_exchange, read_until_quiet

ARG_BYTES = b"ab \t\"'\\x0*$\r\n\x00\xff:+-"


def _arg(rng: random.Random) -> bytes:
    return bytes(rng.choice(ARG_BYTES) for _ in range(rng.choice([0, 1, 3, 12, 40, 300])))


def _inline_arg(rng: random.Random) -> bytes:
    plain = bytes(rng.choice(b"abcxyz019") for _ in range(rng.randint(1, 6)))
    return rng.choice(
        [plain, b'"' + plain + b'\\n"', b"'" + plain + b"'", b'"\\x41' + plain + b'"'])


def _stream(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(1, 40)):
        kind = rng.random()
        if kind < 0.55:
            parts.append(encode_request(b"ECHO", _arg(rng)))
        elif kind < 0.7:
            parts.append(b"ECHO " + _inline_arg(rng) + rng.choice([b"\r\n", b"\n"]))
        elif kind < 0.8:
            parts.append(rng.choice([b"\r\n", b"*0\r\n", b"*-1\r\n", b"\n", b"PING\r\n"]))
        elif kind < 0.9:
            parts.append(encode_request(b"PING", *[_arg(rng) for _ in range(rng.randint(0, 2))]))
        else:
            parts.append(encode_request(b"ECHO", b"x" * rng.randint(60_000, 200_000)))
    if rng.random() < 0.3:  # end with broken framing
        parts.append(rng.choice([b"*1\r\n$x\r\n", b"*2\r\n$4\r\nECHO\r\n:1\r\n", b'ECHO "a\r\n',
                                 b"*1\r\n$999999999999\r\n"]))
    return b"".join(parts)


def _send_in_cuts(port: int, data: bytes, rng: random.Random) -> tuple[bytes, bool]:
    """Like raw_exchange, but the bytes leave in random pieces with tiny pauses."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        i = 0
        while i < len(data):
            step = rng.choice([1, 2, 7, 100, 5000, 70000])
            sock.sendall(data[i : i + step])
            i += step
            if rng.random() < 0.2:
                time.sleep(0.001)
        return read_until_quiet(sock, 0.3)


@pytest.mark.parametrize("seed", range(12))
def test_random_streams_answer_like_redis(seed: int, emqd_port: int, redis_ref: int) -> None:
    rng = random.Random(seed)
    data = _stream(rng)
    expected = raw_exchange(redis_ref, data)
    assert raw_exchange(emqd_port, data) == expected
    assert _send_in_cuts(emqd_port, data, random.Random(seed)) == expected
