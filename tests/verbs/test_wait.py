"""EMQ.WAIT: answered at once for a finished job, parked on the row otherwise, woken by the
write that finishes it (COMPLETE, the dead letter), nil at the timeout; over the wire,
with many waiters, and across a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Block
from emqd.reply import NULL_ARRAY
from emqd.verbs import wait
from tests.support import RawClient, encode_request, start_emqd
from tests.verbs.planner import NOW, drive, keyspace

ROW = b"emq:{q}:job:1"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"state": "completed", "result": "42"}, [b"completed", b"42"]),
        ({"state": "completed"}, [b"completed", None]),
        ({"state": "dead", "last_error": "boom"}, [b"dead", b"boom"]),
        ({"state": "dead"}, [b"dead", None]),
    ],
)
def test_a_finished_job_answers_at_once(row: dict, expected: list) -> None:
    assert drive(wait, ["emq.wait", "q", "1", "0"], keyspace(**{ROW.decode(): row})) == expected


@pytest.mark.parametrize("state", ["pending", "active", "scheduled", "something"])
def test_an_unfinished_job_parks_on_its_row(state: str) -> None:
    got = drive(wait, ["emq.wait", "q", "1", "250"], keyspace(**{ROW.decode(): {"state": state}}))
    assert got == Block((ROW,), 250, NULL_ARRAY)


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({}, ["1", "0"], errors.NO_SUCH_JOB),
        ({"emq:{q}:job:1": [("x", 1)]}, ["1", "0"], errors.WRONGTYPE),
        ({}, ["1", "-1"], errors.must_be_non_negative("TIMEOUT_MS")),
        ({}, ["1", "1.5"], errors.must_be_non_negative("TIMEOUT_MS")),
        ({}, ["1", str(2 ** 63 - 1)], errors.TIMEOUT_RANGE),
        ({}, ["", "0"], errors.INVALID_ID),
    ],
)
def test_refusals(data: dict, argv: list, error: errors.ReplyError) -> None:
    assert drive(wait, ["emq.wait", "q", *argv], keyspace(**data), now=NOW) == error


# --- over the wire -------------------------------------------------------------------------
def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def blocked(r: redis.Redis) -> int:
    return int(r.info("clients")["blocked_clients"])


def parked_waiters(port: int, n: int, r: redis.Redis, *argv: str) -> list[RawClient]:
    """n connections, each with EMQ.WAIT sent and parked (the server counts them blocked)."""
    clients = [RawClient(port) for _ in range(n)]
    for client in clients:
        client.send(encode_request("EMQ.WAIT", "q", *argv))
    until(lambda: blocked(r) == n)
    return clients


def test_answered_at_completion_and_all_waiters_are(r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    waiters = parked_waiters(emqd_port, 5, r, "1", "0")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "60000")
    r.execute_command("EMQ.PROGRESS", "q", job_id, token, "50")  # writes the row: still waits
    r.execute_command("EMQ.EXTEND", "q", job_id, token, "60000")
    time.sleep(0.05)
    assert blocked(r) == 5
    r.execute_command("EMQ.COMPLETE", "q", job_id, token, "RESULT", "done")
    for client in waiters:
        assert client.read_reply() == b"*2\r\n$9\r\ncompleted\r\n$4\r\ndone\r\n"
        assert client.command("PING") == b"+PONG\r\n"  # the connection goes on
        client.close()
    assert blocked(r) == 0


def test_answered_at_death_through_a_retry(r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "a", "MAXATTEMPTS", "2")
    (waiter,) = parked_waiters(emqd_port, 1, r, "1", "0")
    r.execute_command("EMQ.CLAIM", "q", "60000")
    assert r.execute_command("EMQ.FAIL", "q", "1", "1", "ERROR", "first", "BACKOFF", "0") == [
        b"scheduled", 1]
    until(lambda: r.hget("emq:{q}:job:1", "state") == b"pending")  # promoted
    assert blocked(r) == 1
    r.execute_command("EMQ.CLAIM", "q", "60000")
    r.execute_command("EMQ.FAIL", "q", "1", "2", "ERROR", "second")
    assert waiter.read_reply() == b"*2\r\n$4\r\ndead\r\n$6\r\nsecond\r\n"
    waiter.close()


def test_timeout_nil_and_resp3(r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    client = RawClient(emqd_port)
    started = time.monotonic()
    assert client.command("EMQ.WAIT", "q", "1", "100") == b"*-1\r\n"
    assert 0.09 < time.monotonic() - started < 2
    client.command("HELLO", "3")
    assert client.command("EMQ.WAIT", "q", "1", "50") == b"_\r\n"
    client.close()


def test_a_row_deleted_while_waiting_answers_no_such_job(r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.ADD", "q", "b")
    first, second = parked_waiters(emqd_port, 1, r, "1", "0")[0], RawClient(emqd_port)
    second.send(encode_request("EMQ.WAIT", "q", "2", "0"))
    until(lambda: blocked(r) == 2)
    assert r.execute_command("EMQ.REMOVE", "q", "1") == 1
    assert first.read_reply() == b"-ERR no such job\r\n"
    r.delete("emq:{q}:pending", "emq:{q}:job:2")  # a plain DEL of several keys wakes too
    assert second.read_reply() == b"-ERR no such job\r\n"
    for client in (first, second):
        client.close()


def test_inside_multi_it_does_not_block(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    pipe = r.pipeline(transaction=True)
    pipe.execute_command("EMQ.WAIT", "q", "1", "0")
    assert pipe.execute() == [None]


def test_a_job_completed_before_a_restart_still_answers(tmp_path: Path) -> None:
    flags = ("--appendonly", "yes", "--stalled-interval", "0")
    server = start_emqd(*flags, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as client:
            client.execute_command("EMQ.ADD", "q", "a")
            client.execute_command("EMQ.ADD", "q", "b", "MAXATTEMPTS", "1")
            client.execute_command("EMQ.CLAIM", "q", "60000", "COUNT", "2")
            client.execute_command("EMQ.COMPLETE", "q", "1", "1", "RESULT", "kept")
            client.execute_command("EMQ.FAIL", "q", "2", "1", "ERROR", "lost")
    finally:
        server.stop()
    server = start_emqd(*flags, dir=str(tmp_path), port=server.port)
    try:
        with redis.Redis(port=server.port) as client:
            assert client.execute_command("EMQ.WAIT", "q", "1", "0") == [b"completed", b"kept"]
            assert client.execute_command("EMQ.WAIT", "q", "2", "0") == [b"dead", b"lost"]
    finally:
        server.stop()
