"""Real clients over real sockets: redis-py (RESP2 and RESP3), redis-cli, redis-benchmark."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import redis

from tests.support import RawClient
from tests.wire.compare import same_replies


def _round_trip(client: redis.Redis) -> list:
    client.hset("h", mapping={"a": "1"})
    client.zadd("z", {"m": 1.5})
    return [
        client.ping(), client.echo("é"), client.client_getname(), client.hgetall("h"),
        client.zrange("z", 0, -1, withscores=True), client.exists("h", "z", "nope"),
        client.type("z"), sorted(client.keys("*")), client.dbsize(), client.delete("h"),
        client.unlink("z"), client.config_get("databases"),
    ]


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_round_trips_like_redis(protocol: int, emqd_port: int, redis_ref: int) -> None:
    with redis.Redis(port=emqd_port, protocol=protocol, client_name="t") as ours, \
            redis.Redis(port=redis_ref, protocol=protocol, client_name="t") as theirs:
        assert _round_trip(ours) == _round_trip(theirs)
        assert ours.info()["redis_version"] == "7.0.15"


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_pipelines_and_transactions(protocol: int, emqd_port: int) -> None:
    with redis.Redis(port=emqd_port, protocol=protocol) as client:
        pipe = client.pipeline(transaction=False)
        for i in range(500):
            pipe.hset("h", f"f{i}", i)
        pipe.hlen("h")
        assert pipe.execute()[-1] == 500
        tx = client.pipeline(transaction=True)
        tx.hset("t", "a", 1).hget("t", "a").delete("t")
        assert tx.execute() == [1, b"1", 1]
        with pytest.raises(redis.ResponseError):
            bad = client.pipeline(transaction=True)
            bad.hset("t", "a", 1).execute_command("NOSUCH").hget("t", "a")
            bad.execute()
        assert client.exists("t") == 0  # EXECABORT: nothing applied


def test_transactions_answer_like_redis(emqd_port: int, redis_ref: int) -> None:
    same_replies(emqd_port, redis_ref, [
        ("MULTI",), ("HSET", "k", "f", "v"), ("HGET", "k", "f"), ("EXEC",),
        ("MULTI",), ("HSET", "k", "f"), ("HGET", "k", "f"), ("EXEC",),  # arity: EXECABORT
        ("MULTI",), ("NOSUCH",), ("EXEC",), ("EXEC",),
        ("MULTI",), ("CLIENT", "NOPE"), ("DISCARD",), ("DISCARD",),
        ("MULTI",), ("MULTI",), ("ZADD", "k", "1", "m"), ("HGET", "k", "f"), ("EXEC",),  # runtime
        ("MULTI",), ("SHUTDOWN",), ("PING",), ("EXEC",),
        ("MULTI",), ("SELECT", "1"), ("EXEC",),
        ("EXEC", "x"), ("MULTI",), ("PING",), ("EXEC", "x"), ("EXEC",), ("DISCARD", "x"),
        ("MULTI",), ("QUIT",),
    ])


def test_noauth_and_multi_order_like_redis(emqd_auth: int, redis_auth: int) -> None:
    same_replies(emqd_auth, redis_auth, [
        ("MULTI",), ("NOSUCH",), ("PING", "a", "b"), ("PING",), ("EXEC",),
        ("AUTH", "sekret"), ("MULTI",), ("AUTH", "x"), ("PING",), ("EXEC",),
    ])


def _cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["redis-cli", *args], input=input, capture_output=True, text=True,
                          timeout=30)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not installed")
def test_redis_cli(emqd_port: int) -> None:
    port = str(emqd_port)
    assert _cli("-p", port, "PING").stdout == "PONG\n"
    assert _cli("-p", port, "HSET", "h", "field", "value").stdout == "1\n"
    assert _cli("-p", port, "HGETALL", "h").stdout == "field\nvalue\n"
    assert _cli("-p", port, "--no-raw", "TYPE", "h").stdout == "hash\n"
    assert _cli("-p", port, "NOSUCH", "x").stdout.startswith("ERR unknown command 'NOSUCH'")
    assert "redis_version:7.0.15" in _cli("-p", port, "INFO", "server").stdout
    assert _cli("-p", port, "--scan").stdout == "h\n"
    session = _cli("-p", port, input="PING\nHELLO 3\nCLIENT SETNAME cli\nCLIENT GETNAME\n")
    assert session.returncode == 0 and session.stdout.splitlines()[0] == "PONG"
    assert session.stdout.splitlines()[-1] == "cli"


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-benchmark missing")
def test_redis_benchmark_runs_to_completion(emqd_port: int) -> None:
    done = subprocess.run(
        ["redis-benchmark", "-p", str(emqd_port), "-t", "ping,hset", "-q", "-n", "2000"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.replace("\r", "\n").splitlines()
    lines = [line for line in out if "requests per" in line]
    assert {line.split(":")[0] for line in lines} == {"PING_INLINE", "PING_MBULK", "HSET"}
    assert "rror" not in done.stdout + done.stderr
    raw = RawClient(emqd_port)
    assert raw.command("HLEN", "myhash") == b":1\r\n"  # redis-benchmark's key
    raw.close()
