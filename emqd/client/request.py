"""A request as RESP bytes: the multi-bulk a client sends, argument by argument.

One encoder for every client emqd ships: the Worker's connections
(emqd/client/connection.py), its lease keeper (emqd/client/lease_keeper.py, which
imports nothing heavier) and the benchmark's client (emqd/bench/client.py).
Standard library only.
"""

from __future__ import annotations


def encode(*args: bytes | str | int) -> bytes:
    """`*N`, then each argument as a bulk string: bytes as they are, anything else as
    its text in UTF-8 (an int as its digits)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if type(arg) is bytes else str(arg).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)
