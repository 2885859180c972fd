"""Server commands against redis-server 7.0: COMMAND, INFO and TIME by structure; SHUTDOWN."""

from __future__ import annotations

import os
import signal
import socket
import time

import hiredis
import pytest
import redis

from tests.support import RawClient, encode_request, send_shutdown, start_emqd
from tests.wire.compare import same_replies


def test_server_commands_answer_like_redis(emqd_port: int, redis_ref: int) -> None:
    same_replies(emqd_port, redis_ref, [
        ("CONFIG",), ("CONFIG", "nope"), ("CONFIG", "GET"), ("CONFIG", "GET", "save"),
        ("CONFIG", "GET", "appendonly"), ("CONFIG", "GET", "databases"),
        ("CONFIG", "GET", "maxmemory"), ("CONFIG", "GET", "nosuch"), ("CONFIG", "GET", "SAVE"),
        ("CONFIG", "GET", "maxmemory-policy"), ("CONFIG", "GET", "timeout"),
        ("COMMAND", "nope"), ("COMMAND", "INFO", "nosuch"), ("COMMAND", "DOCS", "nosuch"),
        ("COMMAND", "LIST", "x"), ("COMMAND", "COUNT", "x"),
        ("TIME", "x"), ("DBSIZE",), ("INFO", "nosuch"), ("INFO", "keyspace"),
        ("HSET", "k", "f", "v"), ("INFO", "keyspace"), ("DBSIZE",),
        ("SHUTDOWN", "x"), ("SHUTDOWN", "SAVE", "NOSAVE"), ("SHUTDOWN", "ABORT"),
        ("SHUTDOWN", "abort", "NOW"), ("SHUTDOWN", "NOW", "bad"),
        ("MULTI",), ("SHUTDOWN",), ("EXEC",),
    ])


def test_config_get_patterns_list_what_redis_lists(emqd_port: int, redis_ref: int) -> None:
    with redis.Redis(port=emqd_port) as ours, redis.Redis(port=redis_ref) as theirs:
        for pattern in ("maxmemory*", "append*", "*save*", "databases", "port"):
            mine = ours.config_get(pattern)
            assert mine and set(mine) <= set(theirs.config_get(pattern)), pattern
        assert ours.config_get("save") == {"save": ""}
        assert ours.config_get("appendonly") == {"appendonly": "no"}  # the fixture's setting


def _parsed(port: int, protocol: int, *request: str) -> object:
    raw = RawClient(port)
    try:
        if protocol == 3:
            raw.command("HELLO", 3)
        reader = hiredis.Reader()
        reader.feed(raw.command(*request))
        return reader.gets()
    finally:
        raw.close()


def _shape(value: object) -> object:
    """Types all the way down, lists reduced to their first item's shape."""
    if isinstance(value, dict):
        return {"map": sorted(map(str, value))}
    if isinstance(value, list):
        return ["list", _shape(value[0]) if value else None]
    return type(value).__name__


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_and_docs_have_redis_structure(
    protocol: int, emqd_port: int, redis_ref: int
) -> None:
    for name in ("ping", "hset", "del", "client", "config", "hello", "exists"):
        mine = _parsed(emqd_port, protocol, "COMMAND", "INFO", name)[0]  # type: ignore[index]
        ref = _parsed(redis_ref, protocol, "COMMAND", "INFO", name)[0]  # type: ignore[index]
        assert mine[:2] + mine[3:6] == ref[:2] + ref[3:6], name  # name, arity, key positions
        assert set(mine[2]) <= set(ref[2]) | {b"no_multi"}, name  # flags that Redis has too
        assert [type(x) for x in mine] == [type(x) for x in ref], name
        if ref[8]:
            assert _shape(mine[8]) == _shape(ref[8]), name  # key specs
        docs = _parsed(emqd_port, protocol, "COMMAND", "DOCS", name)
        ref_docs = _parsed(redis_ref, protocol, "COMMAND", "DOCS", name)
        mine_doc = _as_dict(_as_dict(docs)[name.encode()])
        assert set(mine_doc) <= set(_as_dict(_as_dict(ref_docs)[name.encode()])), name
    names = set(_parsed(emqd_port, 2, "COMMAND", "LIST"))  # type: ignore[call-overload]
    assert {b"ping", b"hset", b"client|setname", b"config|get"} <= names
    everything = _parsed(emqd_port, 2, "COMMAND")
    assert _parsed(emqd_port, 2, "COMMAND", "COUNT") == len(everything)  # type: ignore[arg-type]
    filtered = _parsed(emqd_port, 2, "COMMAND", "LIST", "FILTERBY", "PATTERN", "client|*")
    assert b"client|setname" in filtered and b"ping" not in filtered  # type: ignore[operator]
    subs = _parsed(emqd_port, 2, "COMMAND", "INFO", "client")[0][9]  # type: ignore[index]
    assert b"client|setname" in {entry[0] for entry in subs}


NEW_IN_ISSUE_26 = ("zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore",
                   "zintercard", "zmpop", "bzmpop", "bzpopmin", "bzpopmax", "zrangestore",
                   "zremrangebylex", "zrandmember", "hrandfield", "hincrbyfloat", "ttl", "pttl",
                   "expiretime", "pexpiretime", "persist", "touch", "randomkey", "expire",
                   "pexpire", "expireat", "pexpireat")


def _spec_places(specs: object) -> list[object]:
    """Where a key spec finds its keys (begin_search, find_keys), without its flags."""
    return [{key: value for key, value in spec.items() if key != b"flags"}
            if isinstance(spec, dict) else spec[2:]
            for spec in specs]  # type: ignore[attr-defined]


@pytest.mark.parametrize("protocol", [2, 3])
def test_the_new_commands_info_is_redis_s(protocol: int, emqd_port: int, redis_ref: int) -> None:
    """Name, arity, flags, key positions, ACL categories and where each key spec looks
    (numkeys of ZUNION and its kin included) are Redis's; tips and spec flags are not
    compared (emqd lists neither)."""
    for name in NEW_IN_ISSUE_26:
        mine = _parsed(emqd_port, protocol, "COMMAND", "INFO", name)[0]  # type: ignore[index]
        ref = _parsed(redis_ref, protocol, "COMMAND", "INFO", name)[0]  # type: ignore[index]
        assert mine[:7] == ref[:7], name
        assert _spec_places(mine[8]) == _spec_places(ref[8]), name


def _as_dict(value: object) -> dict:
    if isinstance(value, dict):
        return value
    items = list(value)  # type: ignore[call-overload]
    return dict(zip(items[::2], items[1::2], strict=True))


def test_info_has_redis_sections_and_the_fields_clients_read(
        emqd_port: int, redis_ref: int) -> None:
    with redis.Redis(port=emqd_port) as ours, redis.Redis(port=redis_ref) as theirs:
        ours.hset("k", "f", "v")
        mine, ref = ours.info("everything"), theirs.info("everything")
        for field in ("redis_version", "run_id", "connected_clients", "used_memory", "aof_enabled",
                      "tcp_port", "uptime_in_seconds", "role", "maxclients", "process_id"):
            assert type(mine[field]) is type(ref[field]), field
        assert mine["redis_version"] == "7.0.15" and len(mine["run_id"]) == 40
        assert mine["db0"] == {"keys": 1, "expires": 0, "avg_ttl": 0}
        assert mine["connected_clients"] >= 1 and mine["aof_enabled"] == 0
        raw_ours, raw_ref = RawClient(emqd_port), RawClient(redis_ref)
        sections = []
        for raw in (raw_ours, raw_ref):
            text = raw.command("INFO")
            sections.append([line for line in text.split(b"\r\n") if line.startswith(b"# ")])
            raw.close()
        assert sections[0] == sections[1]
        assert ours.info("server")["run_id"] == mine["run_id"]
        assert set(ours.info("clients", "keyspace")) >= {"connected_clients", "db0"}


def test_time_is_seconds_and_microseconds(emqd_port: int) -> None:
    with redis.Redis(port=emqd_port) as client:
        seconds, micros = client.time()
        assert abs(seconds + micros / 1e6 - time.time()) < 5 and 0 <= micros < 1_000_000


def _wait_exit(server, timeout: float = 10.0) -> int:  # type: ignore[no-untyped-def]
    return server.proc.wait(timeout=timeout)


def test_shutdown_stops_accepting_answers_in_flight_and_exits_0() -> None:
    server = start_emqd()
    other = RawClient(server.port)
    # In flight on another connection: a pipeline sent before the SHUTDOWN.
    other.send(encode_request("PING") * 3)
    send_shutdown(server.port)
    assert _wait_exit(server) == 0
    assert other.read_until_closed() == b"+PONG\r\n" * 3
    other.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
    server.stop()


def test_sigterm_stops_like_shutdown() -> None:
    server = start_emqd()
    client = RawClient(server.port)
    assert client.command("PING") == b"+PONG\r\n"
    os.kill(server.pid, signal.SIGTERM)
    assert _wait_exit(server) == 0
    assert client.read_until_closed() == b""
    client.close()
    assert "emqd stopped" in server.output()
    server.stop()
