"""CONFIG GET, SET, RESETSTAT, REWRITE against redis-server 7.0, and what a SET changes.

CONFIG SET changes the server it is sent to, so these tests run on a pair of
servers of their own (an emqd and a redis-server started for this module),
never the shared ones; each test starts from the defaults it touches.
Replies are compared byte for byte; where more than one parameter matches,
Redis answers in the order of its hash table (seeded at random at each
start), so those replies are compared as maps.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import hiredis
import pytest
import redis

from tests.support import RawClient, ServerProcess, start_emqd, start_redis
from tests.wire.compare import same_replies

Ports = tuple[int, int]
DEFAULTS = [
    "hash-max-listpack-entries", "512", "hash-max-listpack-value", "64",
    "zset-max-listpack-entries", "128", "zset-max-listpack-value", "64",
    "maxclients", "10000", "appendfsync", "everysec",
    "client-output-buffer-limit", "pubsub 33554432 8388608 60",
]
EMQD_DEFAULTS = ["stalled-interval", "1000", "max-payload", "16777216", "max-attempts", "3",
                 "backoff", "fixed:1000", "max-stalled", "2", "keep-completed", "1000",
                 "keep-dead", "10000", "lane-limit", "1", "keep-log-lines", "100",
                 "keep-completed-ms", "0", "keep-dead-ms", "0", "loglevel", "info"]


@pytest.fixture(scope="module")
def pair(redis_reference: ServerProcess) -> Iterator[Ports]:
    """An emqd and a redis-server for this module's CONFIG SETs alone."""
    ours, theirs = start_emqd(), start_redis()
    yield ours.port, theirs.port
    ours.stop()
    theirs.stop()


@pytest.fixture
def servers(pair: Ports) -> Ports:
    """Both servers empty, with the settings these tests change back at their defaults."""
    for port, extra in zip(pair, (EMQD_DEFAULTS, []), strict=True):
        with redis.Redis(port=port) as client:
            client.flushall()
            client.execute_command("CONFIG", "SET", *DEFAULTS, *extra)
    return pair


def _parse(reply: bytes) -> Any:
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


def _as_map(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    return dict(zip(value[::2], value[1::2], strict=True))


def _get(port: int, *names: str, resp: int = 2) -> dict:
    client = RawClient(port)
    try:
        if resp == 3:
            client.command("HELLO", 3)
        return _as_map(_parse(client.command("CONFIG", "GET", *names)))
    finally:
        client.close()


SET_REFUSALS = [
    # values, read as Redis reads them: integers, memory values, choices, output limits
    ("CONFIG", "SET", "hash-max-listpack-entries", ""),
    ("CONFIG", "SET", "hash-max-listpack-entries", "+5"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "05"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "1kb"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "-1"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "9223372036854775808"),
    ("CONFIG", "SET", "hash-max-listpack-value", "-1"),
    ("CONFIG", "SET", "hash-max-listpack-value", "1 kb"),
    ("CONFIG", "SET", "hash-max-listpack-value", "+1"),
    ("CONFIG", "SET", "hash-max-listpack-value", "99999999999999999999"),
    ("CONFIG", "SET", "zset-max-listpack-value", "9223372036854775808"),
    ("CONFIG", "SET", "zset-max-ziplist-entries", "x"),
    ("CONFIG", "SET", "HASH-max-ziplist-value", "x"),
    ("CONFIG", "SET", "maxclients", "0"),
    ("CONFIG", "SET", "maxclients", "4294967296"),
    ("CONFIG", "SET", "maxclients", "-5"),
    ("CONFIG", "SET", "appendfsync", "sometimes"),
    ("CONFIG", "SET", "auto-aof-rewrite-min-size", "-1"),
    ("CONFIG", "SET", "auto-aof-rewrite-min-size", "99999999999999999999"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 64mb 16mb"),
    ("CONFIG", "SET", "client-output-buffer-limit", "master 64mb 16mb 30"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 64xb 16mb 30"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 1 -1"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 1 +"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 1 2147483648"),
    ("CONFIG", "SET", "client-output-buffer-limit", "PUBSUB  32mb   8mb 60  normal 0 0 0"),
    # names: unknown, immutable in Redis too, protected, twice; the first fault wins
    ("CONFIG", "SET", "nope", "1"),
    ("CONFIG", "SET", "nope\r\nx\0y", "1"),
    ("CONFIG", "SET", "databases", "2"),
    ("CONFIG", "SET", "appendfilename", "x"),
    ("CONFIG", "SET", "cluster-enabled", "yes"),
    ("CONFIG", "SET", "io-threads", "2"),
    ("CONFIG", "SET", "dir", "/tmp"),
    ("CONFIG", "SET", "databases", "1", "nope", "2"),
    ("CONFIG", "SET", "nope", "2", "databases", "1"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "x", "databases", "1"),
    ("CONFIG", "SET", "databases", "1", "databases", "1"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "1", "HASH-MAX-LISTPACK-ENTRIES", "1"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "x", "maxclients", "y"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "1", "maxclients", "y"),
    # the shape of the call
    ("CONFIG", "SET"), ("CONFIG", "SET", "x"), ("CONFIG", "SET", "x", "y", "z"),
    ("CONFIG", "RESETSTAT", "x"), ("CONFIG", "REWRITE"), ("CONFIG", "REWRITE", "x"),
    ("CONFIG", "HELP"), ("CONFIG", "GET", "hash-max-listpack-entries"),
]

SETS = [
    ("CONFIG", "SET", "hash-max-listpack-entries", "10", "hash-max-ziplist-entries", "12"),
    ("CONFIG", "GET", "hash-max-listpack-entries"),
    ("CONFIG", "SET", "hash-max-ziplist-entries", "12", "hash-max-listpack-entries", "10"),
    ("CONFIG", "GET", "hash-max-ziplist-entries"),
    ("CONFIG", "SET", "HASH-MAX-LISTPACK-VALUE", "1KB"),
    ("CONFIG", "GET", "hash-max-listpack-value"),
    ("CONFIG", "SET", "hash-max-listpack-value", "kb"),
    ("CONFIG", "GET", "hash-max-listpack-value"),
    ("CONFIG", "SET", "zset-max-listpack-value", "8796093022208kb"),
    ("CONFIG", "GET", "zset-max-ziplist-value"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "9223372036854775807"),
    ("CONFIG", "GET", "HASH-MAX-listpack-ENTRIES"),
    ("CONFIG", "SET", "maxclients", "4294967295"), ("CONFIG", "GET", "maxclients"),
    ("CONFIG", "SET", "appendfsync", "ALWAYS"), ("CONFIG", "GET", "appendfsync"),
    ("CONFIG", "SET", "auto-aof-rewrite-min-size", "1GB"),
    ("CONFIG", "GET", "auto-aof-rewrite-min-size"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 64mb 16mb 30"),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 2 3 PubSub 4 5 +6"),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("CONFIG", "SET", "client-output-buffer-limit", ""),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("CONFIG", "SET", "client-output-buffer-limit",
     "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 99999999999999999999 0 0"),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("CONFIG", "RESETSTAT"),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_config_set_refuses_and_sets_as_redis_does(servers: Ports, resp: int) -> None:
    same_replies(*servers, SET_REFUSALS, resp=resp)
    same_replies(*servers, SETS, resp=resp)


def test_a_refused_set_changes_nothing(servers: Ports) -> None:
    """All or none, as Redis 7: a bad value anywhere and no pair of the call is applied."""
    names = ("hash-max-listpack-entries", "maxclients", "zset-max-listpack-value", "appendfsync")
    before = [_get(port, *names) for port in servers]
    same_replies(*servers, [
        ("CONFIG", "SET", "hash-max-listpack-entries", "1", "maxclients", "7",
         "appendfsync", "no", "zset-max-listpack-value", "x"),
        ("CONFIG", "SET", "maxclients", "7", "databases", "1"),
        ("CONFIG", "SET", "maxclients", "7", "nope", "1"),
    ])
    assert [_get(port, *names) for port in servers] == before
    assert before[0] == before[1]


@pytest.mark.parametrize("resp", [2, 3])
def test_config_get_finds_each_parameter_once_under_both_names(servers: Ports, resp: int) -> None:
    for names in (("hash-max-*",), ("zset-max-*",), ("h*-ziplist-*",),
                  ("hash-max-listpack-entries", "HASH-max-ziplist-entries"),
                  ("maxclients", "MAXCLIENTS"), ("MAXCLIENTS", "maxc*"),
                  ("maxclients", "maxc*", "MaxClients"), ("nosuch",), ("nosuch*",)):
        ours, theirs = (_get(port, *names, resp=resp) for port in servers)
        assert ours == theirs, names


def test_every_name_both_servers_have_shows_redis_s_value(servers: Ports) -> None:
    ours, theirs = (_get(port, "*") for port in servers)
    shared = set(ours) & set(theirs)
    assert len(shared) >= 35
    differ = {name: (ours[name], theirs[name]) for name in shared if ours[name] != theirs[name]}
    # where emqd's own differ from a redis-server started as the reference (section 7)
    assert set(differ) == {b"port", b"appendfilename", b"loglevel"}, differ
    assert set(ours) - set(theirs) == {
        b"http-port", b"http-maxclients", b"http-head-timeout-ms", b"id-base", b"stalled-interval",
        b"max-payload", b"max-attempts", b"backoff",
        b"max-stalled", b"keep-completed", b"keep-dead", b"lane-limit", b"keep-log-lines",
        b"keep-completed-ms", b"keep-dead-ms"}


# --- the encodings follow the limits of the moment --------------------------------------------
ENCODINGS = [
    # lowered: what exists keeps its encoding until its next write
    ("HSET", "h", "a", "1", "b", "2", "c", "3"), ("ZADD", "z", "1", "a", "2", "b", "3", "c"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "2", "zset-max-ziplist-entries", "2"),
    ("OBJECT", "ENCODING", "h"), ("OBJECT", "ENCODING", "z"),
    ("HSET", "h", "a", "9"), ("OBJECT", "ENCODING", "h"),  # an update converts too
    ("ZADD", "z", "5", "a"), ("OBJECT", "ENCODING", "z"),  # a new score of a member does not
    ("ZADD", "z", "4", "d"), ("OBJECT", "ENCODING", "z"),  # a new member does
    ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    # raised again: never back
    ("CONFIG", "SET", "hash-max-listpack-entries", "512", "zset-max-listpack-entries", "128"),
    ("HDEL", "h", "a", "b"), ("ZREM", "z", "a", "b", "c"),
    ("OBJECT", "ENCODING", "h"), ("OBJECT", "ENCODING", "z"),
    # a new key under the new limits
    ("CONFIG", "SET", "hash-max-listpack-value", "3", "zset-max-listpack-value", "3"),
    ("HSET", "v", "abc", "xyz"), ("OBJECT", "ENCODING", "v"),
    ("HSET", "v", "abcd", "x"), ("OBJECT", "ENCODING", "v"),
    ("HSET", "w", "a", "1"), ("HINCRBY", "w", "a", "1000"), ("OBJECT", "ENCODING", "w"),
    ("ZADD", "s", "1", "abc"), ("OBJECT", "ENCODING", "s"),
    ("ZINCRBY", "s", "1", "abcd"), ("OBJECT", "ENCODING", "s"),
    ("ZADD", "born", "1", "abcd", "-0", "a"), ("OBJECT", "ENCODING", "born"),
    ("ZSCORE", "born", "a"),  # a set born a skiplist keeps -0
    ("ZADD", "grown", "-0", "a", "1", "abcd"), ("OBJECT", "ENCODING", "grown"),
    ("ZSCORE", "grown", "a"),  # born a listpack: its -0 was stored as 0
    ("CONFIG", "SET", "hash-max-listpack-value", "64", "zset-max-listpack-value", "64"),
    # 0 entries: every new key is born big; one entry over a limit of 1, only at the second
    ("CONFIG", "SET", "hash-max-listpack-entries", "0", "zset-max-listpack-entries", "0"),
    ("HSET", "h0", "a", "1"), ("ZADD", "z0", "-0", "a"),
    ("OBJECT", "ENCODING", "h0"), ("OBJECT", "ENCODING", "z0"), ("ZSCORE", "z0", "a"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "1", "zset-max-listpack-entries", "1"),
    ("HSET", "h1", "a", "1", "a", "2"), ("ZADD", "z1", "1", "a", "2", "a"),
    ("ZADD", "z2", "GT", "1", "a", "2", "a"),
    ("OBJECT", "ENCODING", "h1"), ("OBJECT", "ENCODING", "z1"), ("OBJECT", "ENCODING", "z2"),
    ("ZADD", "z1", "1", "b"), ("OBJECT", "ENCODING", "z1"),
    ("HSCAN", "h1", "0"), ("ZSCAN", "z2", "0"),  # a listpack comes whole
]


@pytest.mark.parametrize("resp", [2, 3])
def test_encodings_follow_the_limits_of_the_moment_as_in_redis(servers: Ports, resp: int) -> None:
    same_replies(*servers, ENCODINGS, resp=resp)


# --- what each setting changes in emqd -----------------------------------------------------
def _call(port: int, *args: Any) -> Any:
    with redis.Redis(port=port) as client:
        return client.execute_command(*args)


def _within(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_maxclients_counts_from_the_next_connection(servers: Ports) -> None:
    port = servers[0]
    keep = RawClient(port)
    try:
        assert keep.command("CONFIG", "SET", "maxclients", "1") == b"+OK\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as refused:
            assert refused.recv(100) == b"-ERR max number of clients reached\r\n"
        assert keep.command("CONFIG", "SET", "maxclients", "10000") == b"+OK\r\n"
        assert _call(port, "PING") is True
    finally:
        keep.close()


def test_max_payload_and_the_queue_defaults_reach_the_verbs(servers: Ports) -> None:
    port = servers[0]
    assert _call(port, "CONFIG", "SET", "max-payload", "1kb", "max-attempts", "1",
                 "backoff", "exp:10:100", "keep-dead", "5") == b"OK"
    with pytest.raises(redis.ResponseError, match="payload exceeds max-payload"):
        _call(port, "EMQ.ADD", "q", "x" * 1025)
    assert _call(port, "EMQ.ADD", "q", "x" * 1024) == b"1"
    assert _call(port, "EMQ.CONFIG", "q", "GET") == {
        b"max_attempts": b"1", b"backoff": b"exp:10:100", b"max_stalled": b"2",
        b"keep_completed": b"1000", b"keep_dead": b"5", b"lane_limit": b"1",
        b"keep_log_lines": b"100", b"keep_completed_ms": b"0", b"keep_dead_ms": b"0"}
    job_id, token, _, _ = _call(port, "EMQ.CLAIM", "q", "30000")
    assert _call(port, "EMQ.FAIL", "q", job_id, token) == [b"dead", 1]  # the cap of 1
    # a queue's own setting still wins over the server's default
    assert _call(port, "EMQ.CONFIG", "q", "SET", "max_attempts", "4") == b"OK"
    assert _call(port, "CONFIG", "SET", "max-attempts", "2") == b"OK"
    assert _call(port, "EMQ.CONFIG", "q", "GET", "max_attempts") == b"4"
    with pytest.raises(redis.ResponseError, match=r"argument 'max-attempts'\) - argument must "
                                                  r"be between 1 and"):
        _call(port, "CONFIG", "SET", "max-attempts", "0")
    with pytest.raises(redis.ResponseError, match="must be a backoff rule"):
        _call(port, "CONFIG", "SET", "backoff", "exp")


def test_lowered_retention_defaults_trim_what_is_kept_already(servers: Ports) -> None:
    port = servers[0]
    for _ in range(6):
        _call(port, "EMQ.ADD", "q", "x")
        job_id, token, _, _ = _call(port, "EMQ.CLAIM", "q", "30000")
        _call(port, "EMQ.COMPLETE", "q", job_id, token)
    completed = "emq:{q}:completed"
    assert _call(port, "ZCARD", completed) == 6
    assert _call(port, "CONFIG", "SET", "keep-completed", "2") == b"OK"
    assert _within(lambda: _call(port, "ZCARD", completed) == 2, 5)
    assert _call(port, "ZRANGE", completed, "0", "-1") == [b"5", b"6"]  # the newest kept


def test_an_age_limit_set_by_config_set_trims_the_rows_older(servers: Ports) -> None:
    port = servers[0]
    for _ in range(3):
        _call(port, "EMQ.ADD", "q", "x")
        job_id, token, _, _ = _call(port, "EMQ.CLAIM", "q", "30000")
        _call(port, "EMQ.COMPLETE", "q", job_id, token)
    completed = "emq:{q}:completed"
    time.sleep(0.15)
    assert _call(port, "CONFIG", "SET", "keep-completed-ms", "100") == b"OK"
    assert _call(port, "CONFIG", "GET", "keep-completed-ms") == {b"keep-completed-ms": b"100"}
    assert _within(lambda: _call(port, "ZCARD", completed) == 0, 5)
    assert _call(port, "EXISTS", "emq:{q}:job:1") == 0


def test_the_stall_sweep_stops_and_starts_with_stalled_interval(servers: Ports) -> None:
    port = servers[0]
    active = "emq:{q}:active"
    assert _call(port, "CONFIG", "SET", "stalled-interval", "0") == b"OK"
    _call(port, "EMQ.ADD", "q", "x")
    _call(port, "EMQ.CLAIM", "q", "20")  # a lease of 20 ms, never heartbeated
    time.sleep(0.3)
    assert _call(port, "ZCARD", active) == 1  # no sweep: the lease ran out, nobody looked
    assert _call(port, "CONFIG", "SET", "stalled-interval", "100") == b"OK"
    assert _within(lambda: _call(port, "ZCARD", active) == 0, 5)
    assert _call(port, "HGET", "emq:{q}:job:1", "state") == b"pending"


def test_resetstat_zeroes_info_s_counters(servers: Ports) -> None:
    port = servers[0]
    with redis.Redis(port=port) as client:  # one connection, kept across these commands
        client.execute_command("CONFIG", "SET", "maxclients", "1")  # the server is full
        with socket.create_connection(("127.0.0.1", port), timeout=5) as refused:
            assert refused.recv(100).startswith(b"-ERR max number of clients")
        client.execute_command("CONFIG", "SET", "maxclients", "10000")
        stats = client.info("stats")
        assert stats["rejected_connections"] >= 1 and stats["total_commands_processed"] > 2
        assert client.execute_command("CONFIG", "RESETSTAT") == b"OK"
        stats = client.info("stats")
        assert stats["rejected_connections"] == 0
        assert 1 <= stats["total_commands_processed"] <= 2  # INFO itself, at most
        assert stats["housekeeping_promoted"] == 0


def test_config_set_inside_multi_applies_at_exec(servers: Ports) -> None:
    client = RawClient(servers[0])
    try:
        assert client.command("MULTI") == b"+OK\r\n"
        assert client.command("CONFIG", "SET", "maxclients", "77") == b"+QUEUED\r\n"
        assert client.command("CONFIG", "SET", "maxclients", "x") == b"+QUEUED\r\n"
        assert client.command("EXEC") == (
            b"*2\r\n+OK\r\n-ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
            b"argument couldn't be parsed into an integer\r\n")
        assert _get(servers[0], "maxclients") == {b"maxclients": b"77"}
    finally:
        client.close()
