"""Connection commands, byte for byte with redis-server 7.0 (HELLO and CLIENT by structure)."""

from __future__ import annotations

import pytest
import redis

from tests.support import RawClient, encode_request
from tests.wire.compare import same_replies, shape

SAME_BYTES = [
    ("PING",), ("PING", "hi"), ("PING", "a", "b"), ("ECHO", ""), ("ECHO", "a\r\nb"), ("ECHO",),
    ("SELECT", "0"), ("SELECT", "1"), ("SELECT", "-1"), ("SELECT", "x"), ("SELECT", "99999999999"),
    ("SELECT", "2147483647"),
    ("SELECT", "-2147483649"),
    ("SELECT",),
    ("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "bob", "x"), ("AUTH", "a", "b", "c"),
    ("AUTH",),
    ("HELLO", "4"), ("HELLO", "0"), ("HELLO", "x"), ("HELLO", "2", "AUTH", "default"),
    ("HELLO", "2", "FOO"), ("HELLO", "2", "SETNAME", "a b"), ("HELLO", "2", "SETNAME", "é"),
    ("CLIENT",), ("CLIENT", "NOPE"), ("CLIENT", "SETNAME"), ("CLIENT", "SETNAME", "a b"),
    ("CLIENT", "SETNAME", "a\nb"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", "worker-1"),
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""), ("CLIENT", "GETNAME"), ("CLIENT", "ID", "x"),
    ("CLIENT", "INFO", "x"), ("CLIENT", "LIST", "TYPE", "pubsub"), ("CLIENT", "LIST", "TYPE", "x"),
    ("CLIENT", "LIST", "ID", "0"), ("CLIENT", "LIST", "ID", "x"), ("CLIENT", "LIST", "ID", "-1"),
    ("CLIENT", "LIST", "TYPE", "normal", "x"), ("CLIENT", "LIST", "ID"),
    ("CLIENT", "LIST", "ID", "99999"), ("CLIENT", "LIST", "FOO"),
    ("RESET", "x"), ("QUIT", "x", "y"),
]


def same_shapes(emqd_port: int, redis_port: int, script: list[tuple]) -> None:
    """Send `script` on one connection to each server; each reply has Redis's structure
    (compared by `shape`, since ids, names and addresses differ)."""
    ours, theirs = RawClient(emqd_port), RawClient(redis_port)
    try:
        for request in script:
            assert shape(ours.command(*request)) == shape(theirs.command(*request)), request
    finally:
        ours.close()
        theirs.close()


def test_connection_commands_answer_like_redis(emqd_port: int, redis_ref: int) -> None:
    same_replies(emqd_port, redis_ref, SAME_BYTES)


@pytest.mark.parametrize("resp", [2, 3])
def test_hello_switches_protocol_and_answers_in_the_new_one(
    resp: int, emqd_port: int, redis_ref: int
) -> None:
    script = [("HELLO", resp), ("HELLO",), ("CLIENT", "GETNAME"), ("PING",), ("ECHO", "x"),
              ("HELLO", resp, "SETNAME", "n"), ("CLIENT", "GETNAME"), ("CONFIG", "GET", "save"),
              ("MULTI",), ("HELLO", 5 - resp), ("EXEC",), ("PING",)]
    same_shapes(emqd_port, redis_ref, script)


def test_hello_inside_exec_switches_between_replies_like_redis(
    emqd_port: int, redis_ref: int
) -> None:
    script = [("MULTI",), ("CLIENT", "GETNAME"), ("HELLO", 3), ("CLIENT", "GETNAME"), ("EXEC",),
              ("MULTI",), ("CLIENT", "GETNAME"), ("HELLO", 2), ("CLIENT", "GETNAME"), ("EXEC",)]
    same_shapes(emqd_port, redis_ref, script)


def test_client_id_info_and_list_have_redis_structure(emqd_port: int, redis_ref: int) -> None:
    for port in (emqd_port, redis_ref):
        with redis.Redis(port=port, protocol=3) as client:
            client.client_setname("me")
            me = client.client_info()
            assert me["id"] == client.client_id() and me["name"] == "me" and me["resp"] == "3"
            listed = {int(entry["id"]): entry for entry in client.client_list()}
            assert listed[int(me["id"])]["name"] == "me"
    fields = []
    for port in (emqd_port, redis_ref):
        raw = RawClient(port)
        fields.append([item.split(b"=")[0] for item in raw.command("CLIENT", "INFO").split()[1:]])
        raw.close()
    assert fields[0] == fields[1]


def test_reset_returns_to_a_fresh_connection(emqd_port: int, redis_ref: int) -> None:
    script = [("HELLO", 3, "SETNAME", "x"), ("MULTI",), ("PING",), ("RESET",),
              ("CLIENT", "GETNAME"), ("EXEC",), ("PING",)]
    same_shapes(emqd_port, redis_ref, script)


def test_quit_answers_ok_then_closes(emqd_port: int, redis_ref: int) -> None:
    for port in (emqd_port, redis_ref):
        raw = RawClient(port)
        raw.send(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
        assert raw.read_until_closed() == b"+OK\r\n"
        raw.close()


def test_a_pipeline_longer_than_a_parse_slice_is_answered_in_order_like_redis(
        emqd_port: int, redis_ref: int) -> None:
    """One write of ~60 KiB (the server parses and runs a chunk FEED_BYTES at a time,
    wire/protocol.py): every reply comes back, in order, as Redis's do."""
    pipeline = b"".join(encode_request("HSET", "feed-slices", b"f%04d" % i, b"v" * 20)
                        for i in range(1000))
    pipeline += encode_request("HLEN", "feed-slices") + encode_request("DEL", "feed-slices")
    answers = []
    for port in (emqd_port, redis_ref):
        raw = RawClient(port)
        raw.send(pipeline + b"*1\r\n$4\r\nQUIT\r\n")
        answers.append(raw.read_until_closed())
        raw.close()
    assert answers[0] == answers[1]
    assert answers[0].endswith(b":1000\r\n:1\r\n+OK\r\n")


def test_nothing_after_quit_runs_in_a_chunk_longer_than_a_parse_slice(emqd_port: int) -> None:
    """QUIT, then ~60 KiB of writes in the same write: none of them runs."""
    after = b"".join(encode_request("HSET", "after-quit", b"f%04d" % i, b"v" * 20)
                     for i in range(1000))
    raw = RawClient(emqd_port)
    raw.send(b"*1\r\n$4\r\nQUIT\r\n" + after)
    assert raw.read_until_closed() == b"+OK\r\n"
    raw.close()
    check = RawClient(emqd_port)
    assert check.command("EXISTS", "after-quit") == b":0\r\n"
    check.close()


PASSWORD_SCRIPT = [
    ("PING",), ("nosuch",), ("ECHO",), ("CLIENT", "NOPE"), ("MULTI",), ("HELLO", "3"),
    ("HELLO", "3", "AUTH", "default", "bad"), ("HELLO", "3", "AUTH", "bob", "sekret"),
    ("AUTH", "bad"), ("AUTH", "default", "bad"), ("AUTH", "a", "b", "c"), ("QUIT",),
]
AUTHED_SCRIPT = [
    ("AUTH", "sekret"), ("PING",), ("MULTI",), ("AUTH", "sekret"), ("EXEC",),
    ("RESET",), ("PING",), ("HELLO", "2", "AUTH", "default", "sekret", "SETNAME", "w"),
    ("CLIENT", "GETNAME"), ("AUTH", "default", "sekret"),
]


def test_requirepass_refusals_like_redis(emqd_auth: int, redis_auth: int) -> None:
    same_replies(emqd_auth, redis_auth, PASSWORD_SCRIPT)
    same_shapes(emqd_auth, redis_auth, AUTHED_SCRIPT)


def test_client_setinfo_is_accepted_for_redis_py(emqd_port: int) -> None:
    """Redis 7.2's CLIENT SETINFO, which redis-py sends: emqd answers OK (7.0 has none)."""
    raw = RawClient(emqd_port)
    assert raw.command("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == b"+OK\r\n"
    assert raw.command("CLIENT", "SETINFO", "LIB-VER", "5.0") == b"+OK\r\n"
    assert b" lib-name=redis-py lib-ver=5.0" in raw.command("CLIENT", "INFO")
    raw.close()


# Redis 7.2's clientSetinfoCommand (src/networking.c, tag 7.2.4), which Debian's 7.0 lacks,
# so these texts are the source's, not a reference server's: an attribute outside '!'..'~'
# (checked as a C string, up to a NUL) answers "<attr as typed> cannot contain spaces,
# newlines or special characters.", and an unknown one "Unrecognized option '<attr>'".
@pytest.mark.parametrize("attr", ["lib-name", "LIB-VER", "Lib-Name"])
@pytest.mark.parametrize("value", [b"a b", b"x\r\nid=1 addr=forged", b"tab\t", b"\x7f",
                                   b"caf\xc3\xa9", b"ok\x00\n"[3:] + b"x"])
def test_client_setinfo_refuses_what_would_break_client_list(
    emqd_port: int, attr: str, value: bytes
) -> None:
    raw = RawClient(emqd_port)
    try:
        assert raw.command("CLIENT", "SETINFO", attr, "good") == b"+OK\r\n"
        assert raw.command("CLIENT", "SETINFO", attr, value) == (
            b"-ERR %b cannot contain spaces, newlines or special characters.\r\n" % attr.encode())
        line = raw.command("CLIENT", "INFO").split(b"\r\n", 1)[1][:-2]  # the bulk's body
        assert f" {attr.lower()}=good".encode() in line  # unchanged
        assert line.count(b"\n") == 1  # one client, one line
        assert raw.command("PING") == b"+PONG\r\n"  # the connection is kept
    finally:
        raw.close()


def test_client_setinfo_checks_up_to_a_nul_and_knows_two_attributes(emqd_port: int) -> None:
    raw = RawClient(emqd_port)
    try:
        # Redis checks (and CLIENT LIST shows) the value as a C string: up to its NUL.
        assert raw.command("CLIENT", "SETINFO", "lib-name", b"lib\x00 \r\nforged") == b"+OK\r\n"
        line = raw.command("CLIENT", "INFO").split(b"\r\n", 1)[1][:-2]  # the bulk's body
        assert b" lib-name=lib lib-ver=" in line and line.count(b"\n") == 1
        assert raw.command("CLIENT", "SETINFO", "lib-nom", "x") == (
            b"-ERR Unrecognized option 'lib-nom'\r\n")
        assert raw.command("CLIENT", "SETINFO", "lib-name", "") == b"+OK\r\n"  # clears it
        assert b"lib-name=lib" not in raw.command("CLIENT", "INFO")
    finally:
        raw.close()
