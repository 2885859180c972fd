"""BZPOPMIN, BZPOPMAX and BZMPOP park and wake as Redis's do, compared reply for reply.

Each scenario runs on emqd and on the reference redis-server with the same
clients (one that waits, others that write), and every reply each client
reads is compared byte for byte: who is served, from which key, when (after
which write), and what a timeout answers. The waits are bounded: a client is
known to be parked when INFO's `blocked_clients` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.persist.helpers import dump_file, redis_dump
from tests.support import RawClient, encode_request, start_emqd, start_redis

pytestmark = pytest.mark.redis_reference

WAIT_S = 5.0


def parked(port: int, count: int) -> None:
    """Wait (bounded) until `count` clients are blocked on `port`."""
    with redis.Redis(port=port) as client:
        deadline = time.monotonic() + WAIT_S
        while client.info("clients")["blocked_clients"] != count:
            assert time.monotonic() < deadline, f"blocked_clients never reached {count}"
            time.sleep(0.005)


Script = Callable[[int, int], list[bytes]]


_OPEN: list[RawClient] = []  # the scripts' clients, closed by `both`


def both(emqd_port: int, redis_port: int, resp: int, script: Script) -> list[bytes]:
    try:
        mine = script(emqd_port, resp)
        theirs = script(redis_port, resp)
    finally:
        while _OPEN:
            _OPEN.pop().close()
    assert mine == theirs
    return theirs


def clients(port: int, resp: int, n: int) -> list[RawClient]:
    out = [RawClient(port) for _ in range(n)]
    _OPEN.extend(out)
    for client in out:
        client.command("HELLO", resp)
    out[0].command("FLUSHALL")
    return out


def served_after_a_write(port: int, resp: int) -> list[bytes]:
    waiter, writer = clients(port, resp, 2)
    replies = []
    for request, write in [
        (("BZPOPMIN", "z1", "z2", "0"), ("ZADD", "z2", "3", "c", "1", "a")),
        (("BZPOPMAX", "z1", "z2", "0"), ("ZADD", "z1", "5", "e", "7", "g")),
        (("BZMPOP", "0", "2", "z3", "z4", "MIN", "COUNT", "5"), ("ZADD", "z4", "1", "x", "2", "y")),
        (("BZMPOP", "0", "1", "z3", "MAX"), ("ZADD", "z3", "1", "x", "2", "y")),
        (("BZPOPMIN", "z1", "z1", "z5", "z1", "0.5"), ("ZADD", "z5", "-0", "m")),
    ]:
        replies.append(writer.command("DEL", "z1", "z2", "z3", "z4", "z5"))
        waiter.send(encode_request(*request))
        parked(port, 1)
        replies.append(writer.command(*write))
        replies.append(waiter.read_reply())
        replies.append(writer.command("ZRANGE", write[1], "0", "-1", "WITHSCORES"))
    return replies


def what_does_not_wake(port: int, resp: int) -> list[bytes]:
    """A transaction that adds and deletes, a hash at the key, then a real member."""
    waiter, writer = clients(port, resp, 2)
    waiter.send(encode_request("BZPOPMIN", "z", "0"))
    parked(port, 1)
    replies = [writer.command("MULTI"), writer.command("ZADD", "z", "1", "a"),
               writer.command("DEL", "z"), writer.command("HSET", "z", "f", "v"),
               writer.command("EXEC")]
    parked(port, 1)  # still waiting: the key holds a hash
    replies += [writer.command("DEL", "z"), writer.command("ZADD", "z", "2", "b")]
    replies.append(waiter.read_reply())
    return replies


def first_come_first_served(port: int, resp: int) -> list[bytes]:
    first, second, third, writer = clients(port, resp, 4)
    first.send(encode_request("BZPOPMIN", "z", "0"))
    parked(port, 1)
    second.send(encode_request("BZMPOP", "0", "1", "z", "MAX", "COUNT", "2"))
    parked(port, 2)
    third.send(encode_request("BZPOPMAX", "z", "0"))
    parked(port, 3)
    replies = [writer.command("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")]
    replies += [first.read_reply(), second.read_reply(), third.read_reply()]
    replies.append(writer.command("ZRANGE", "z", "0", "-1", "WITHSCORES"))
    return replies


def timeouts(port: int, resp: int) -> list[bytes]:
    waiter, = clients(port, resp, 1)
    replies = []
    for request in [("BZPOPMIN", "z", "0.05"), ("BZPOPMAX", "z", "y", "0.0001"),
                    ("BZMPOP", "0.05", "2", "z", "y", "MIN"), ("BZPOPMIN", "z", "1e-400")]:
        started = time.monotonic()
        replies.append(waiter.command(*request))
        assert time.monotonic() - started < 2.0
    return replies


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("script", [served_after_a_write, what_does_not_wake,
                                    first_come_first_served, timeouts])
def test_blocking_pops_wake_as_redis_s(emqd_port: int, redis_ref: int, resp: int,
                                       script: Script) -> None:
    both(emqd_port, redis_ref, resp, script)


def test_a_timeout_of_zero_waits_for_ever_and_a_closed_client_stops_waiting(
        emqd_port: int) -> None:
    """-0.0001 s rounds up to 0 ms: no timeout, as in Redis (timeout.c takes ceill)."""
    waiter = RawClient(emqd_port)
    waiter.send(encode_request("BZPOPMIN", "z", "-0.0001"))
    parked(emqd_port, 1)
    time.sleep(0.2)
    parked(emqd_port, 1)
    waiter.close()
    parked(emqd_port, 0)


def test_a_served_pop_is_one_record_that_emqd_and_redis_load(tmp_path: Path) -> None:
    """The new writes each log one plan: the file replays to the same keyspace in emqd
    and in Redis, -0 scores and long-double sums included."""
    (tmp_path / "emqd").mkdir()
    server = start_emqd("--appendonly", "yes", "--appendfsync", "always",
                        dir=str(tmp_path / "emqd"))
    try:
        waiter, writer = RawClient(server.port), RawClient(server.port)
        waiter.send(encode_request("BZPOPMIN", "q", "0"))
        parked(server.port, 1)
        writes = [
            ("ZADD", "q", "1", "a", "2", "b"),
            ("ZADD", "s", *[x for i in range(130) for x in (str(i), f"m{i}")]),
            ("ZADD", "s", "-0", "z"),  # a skiplist keeps -0
            ("ZUNIONSTORE", "u", "2", "s", "q", "WEIGHTS", "1", "-1"),
            ("ZINTERSTORE", "i", "2", "s", "s", "AGGREGATE", "MIN"),
            ("ZDIFFSTORE", "d", "1", "s"),
            ("ZRANGESTORE", "r", "s", "0", "9"),
            ("ZREMRANGEBYLEX", "r", "[m1", "[m5"),
            ("ZMPOP", "1", "s", "MAX", "COUNT", "3"),
            ("HINCRBYFLOAT", "h", "f", "0.1"),
            ("HINCRBYFLOAT", "h", "f", "0.2"),
        ]
        for argv in writes:
            writer.command(*argv)
        assert waiter.read_reply().startswith(b"*3\r\n$1\r\nq\r\n")
        expected = {key: value for key, value in _dump_live(server.port).items()}
        waiter.close()
        writer.close()
    finally:
        server.stop()
    path = tmp_path / "emqd" / "emqd.aof"
    assert dump_file(str(path)) == expected
    data = path.read_bytes()
    # one record a write; three hold two ops: the skiplist STOREs that keep z's -0
    assert data.count(b"*1\r\n$5\r\nMULTI\r\n") == 3
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "emqd.aof").write_bytes(data)
    reference = start_redis("--appendonly", "yes", "--appendfilename", "emqd.aof",
                            dir=str(tmp_path / "redis"))
    try:
        with redis.Redis(port=reference.port) as client:
            deadline = time.monotonic() + 20
            while client.info("persistence")["loading"] and time.monotonic() < deadline:
                time.sleep(0.01)
            assert redis_dump(client) == expected
    finally:
        reference.stop()


def _dump_live(port: int) -> dict:
    with redis.Redis(port=port) as client:
        return redis_dump(client)
