"""Keys in emqd never expire: what TTL and its family answer, and EXPIRE's refusal.

TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST answer what Redis answers for
a key without an expiry (tests/differential/test_family_edges.py compares
them byte for byte); here, what is emqd's own: EXPIRE and its family are
refused with a text that says why, inside MULTI too, and write nothing.
"""

from __future__ import annotations

import pytest

from tests.support import RawClient


@pytest.mark.parametrize("argv", [
    ("EXPIRE", "h", "10"), ("PEXPIRE", "h", "100", "NX"), ("EXPIREAT", "h", "1"),
    ("pexpireat", "nokey", "1"), ("EXPIRE", "h", "x"),
])
def test_expire_and_its_family_are_refused(raw: RawClient, argv: tuple[str, ...]) -> None:
    raw.command("HSET", "h", "f", "v")
    name = argv[0].upper().encode()
    assert raw.command(*argv) == b"-ERR keys do not expire in emqd: %s is not supported\r\n" % name
    assert raw.command("TTL", "h") == b":-1\r\n"
    assert raw.command("HGETALL", "h") == b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"


def test_a_refused_expire_inside_multi_is_its_own_reply(raw: RawClient) -> None:
    assert raw.command("MULTI") == b"+OK\r\n"
    assert raw.command("EXPIRE", "h", "1") == b"+QUEUED\r\n"
    assert raw.command("HSET", "h", "f", "v") == b"+QUEUED\r\n"
    assert raw.command("EXEC") == (b"*2\r\n-ERR keys do not expire in emqd: EXPIRE is not "
                                   b"supported\r\n:1\r\n")
    assert raw.command("PERSIST", "h") == b":0\r\n"
    assert raw.command("EXPIRE", "h") == (b"-ERR wrong number of arguments for 'expire' "
                                          b"command\r\n")
