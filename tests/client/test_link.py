"""The Worker's link (emqd/client/link.py, connection.py): one write per loop turn, replies
matched to their verbs, error replies as redis-py names them, and where it connects.

The Batcher is driven with a recording connection (no socket); the rest goes
through a real emqd on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

import pytest
import redis
from redis.exceptions import AuthenticationError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError

from emqd.client import Job, Queue, StaleJob
from emqd.client.commands import QueueCommands
from emqd.client.connection import Connection, Endpoint, encode
from emqd.client.errors import JobStateError, reply_error
from emqd.client.link import Batcher, Line, Link
from emqd.client.routes import Routes
from tests.support import start_emqd


class Recording:
    """A connection that records each `send` (one write) and answers OK to everything."""

    broken = False
    retired = False

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []

    def retire(self) -> None:
        self.retired = True

    def send(self, requests: list[bytes]) -> asyncio.Future[list[Any]]:
        self.writes.append(requests)
        answered: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        answered.set_result([b"OK"] * len(requests))
        return answered


class Placed:
    """Where the recording line is: one place, which never moves (no socket)."""

    def __init__(self) -> None:
        self.routes = Routes(["redis://127.0.0.1:6390"], b"q")

    async def connect(self, name: str) -> tuple[str, Connection]:
        raise AssertionError("the recording line is open already")


class Moving:
    """Where lines connect in the moving tests: wherever the routes say now, on a
    recording connection (no socket)."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    async def connect(self, name: str) -> tuple[str, Connection]:
        return self.routes.step(time.monotonic()).url, Recording()  # type: ignore[return-value]


def fronts(routes: Routes, owner: str) -> None:
    """Both fronts answered a look naming `owner` (so neither needs a probe)."""
    for url, first in ((A, "a:1"), (B, "b:2")):
        other = "b:2" if first == "a:1" else "a:1"
        routes.looked(url, [[first.encode(), other.encode()], owner.encode()], time.monotonic())


A, B = "redis://a:1", "redis://b:2"


async def test_a_line_moves_to_the_new_owner_and_lets_its_old_connection_finish() -> None:
    routes = Routes([A, B], b"q")
    fronts(routes, "a:1")
    line = Line(Moving(routes), "w")
    first = await line.open()
    assert (line.url, line.ready) == (A, first)
    fronts(routes, "b:2")  # a look found the queue moved
    assert line.ready is None  # judged again before the next verb
    second = await line.open()
    assert (line.url, line.ready) == (B, second)
    assert first.retired and not second.retired  # type: ignore[attr-defined]
    fronts(routes, "b:2")
    assert await line.open() is second  # nothing moved: the same connection


async def test_a_lost_connection_passes_its_front_over() -> None:
    routes = Routes([A, B], b"q")
    fronts(routes, "a:1")
    line = Line(Moving(routes), "w")
    first = await line.open()
    first.broken = True  # type: ignore[misc]
    await line.open()
    assert line.url == B and A in routes.down and not first.retired  # type: ignore[attr-defined]


async def test_verbs_asked_in_one_loop_turn_go_out_in_one_write() -> None:
    line = Line(Placed(), "test")
    line.connection = Recording()  # type: ignore[assignment]
    line.changes = line.routes.changes
    batcher = Batcher(line)
    commands = QueueCommands("q")
    jobs = [Job(str(n), b"", "1") for n in range(5)]
    first = [batcher.submit(commands.complete(job)) for job in jobs]
    await asyncio.gather(*first)
    second = [batcher.submit(commands.requeue(job)) for job in jobs[:2]]
    await asyncio.gather(*second)
    writes = line.connection.writes  # type: ignore[union-attr]
    assert [len(write) for write in writes] == [5, 2]
    assert writes[0][3] == encode(("EMQ.COMPLETE", b"q", b"3", b"1"))
    assert writes[1][0] == encode(("EMQ.REQUEUE", b"q", b"0", b"1"))


@pytest.mark.parametrize(("text", "kind", "message"), [
    ("EMQSTALE job gone", StaleJob, "EMQSTALE job gone"),
    ("EMQSTATE job is active", JobStateError, "EMQSTATE job is active"),
    ("WRONGPASS invalid username-password pair or user is disabled.", AuthenticationError,
     "invalid username-password pair or user is disabled."),
    ("NOAUTH Authentication required.", AuthenticationError, "Authentication required."),
    ("TRYAGAIN the write was not acknowledged", TryAgainError,
     "the write was not acknowledged"),
    ("ERR syntax error", ResponseError, "ERR syntax error"),
    ("MISCONF Errors writing to the AOF file", ResponseError,
     "MISCONF Errors writing to the AOF file"),
])
def test_error_replies_become_what_redis_py_and_the_client_raise(
        text: str, kind: type, message: str) -> None:
    error = reply_error(ResponseError(text))
    assert type(error) is kind and str(error) == message


def test_the_endpoint_is_the_one_the_queue_s_pool_would_reach() -> None:
    plain = Endpoint.of(Queue("q", "redis://user:pw@10.1.2.3:7000/2").client.connection_pool)
    assert (plain.host, plain.port, plain.username, plain.password, plain.db, plain.tls) == (
        "10.1.2.3", 7000, "user", "pw", 2, None)
    assert plain.login("w")[:2] == [("AUTH", "user", "pw"), ("SELECT", 2)]
    local = Endpoint.of(Queue("q", "unix:///tmp/emqd.sock").client.connection_pool)
    assert local.path == "/tmp/emqd.sock" and local.login("w")[0] == ("CLIENT", "SETNAME", "w")
    tls = Endpoint.of(Queue("q", "rediss://127.0.0.1:6392", ssl_cert_reqs="none")
                      .client.connection_pool)
    assert isinstance(tls.tls, ssl.SSLContext) and tls.tls.verify_mode == ssl.CERT_NONE


async def test_a_pipeline_s_replies_reach_their_own_verbs(emqd_port: int) -> None:
    async with Queue("piped", f"redis://127.0.0.1:{emqd_port}") as queue:
        await queue.add_many([b"a", b"b", b"c", b"d"])
        link = Link(queue, "emqd-worker?host=test")
        try:
            a, b, c, d = await link.claim(30_000, count=4)
            stale = Job(b.id, b.payload, "99")
            answers = await asyncio.gather(
                link.complete(a, "done"), link.fail(stale, "x"),
                link.fail(c, "boom", max_attempts=1), link.requeue(d),
                link.extend(b, 60_000), link.get(a.id), return_exceptions=True)
        finally:
            link.close()
        assert answers[0] is None
        assert (answers[5].state, answers[5].fields["attempts"]) == ("completed", a.token.encode())
        assert isinstance(answers[1], StaleJob) and "token mismatch" in str(answers[1])
        assert answers[2].dead and answers[3] is None and isinstance(answers[4], int)
        states = [(await queue.get(job.id)).state for job in (a, b, c, d)]
        assert states == ["completed", "active", "dead", "pending"]
        assert (await queue.get(a.id)).result == b"done"


async def test_a_lost_connection_fails_the_verbs_in_flight_and_the_next_one_reconnects(
        tmp_path: Any) -> None:
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    port = server.port
    try:
        async with Queue("lost", f"redis://127.0.0.1:{port}") as queue:
            await queue.add(b"a")
            link = Link(queue, "emqd-worker?host=test")
            try:
                [job] = await link.claim(30_000)
                server.kill()
                with pytest.raises(RedisConnectionError):
                    await link.extend(job, 30_000)
                server = start_emqd("--appendonly", "yes", dir=str(tmp_path), port=port)
                assert isinstance(await link.extend(job, 30_000), int)  # a new connection
                with redis.Redis(port=port) as admin:
                    names = [c["name"] for c in admin.client_list()]
                assert names.count("emqd-worker?host=test") == 1  # the claims' was not reopened
            finally:
                link.close()
    finally:
        server.stop()
