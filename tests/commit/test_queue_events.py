"""Queue events (emqd/commit/queue_events.py): the JSON of each transition, published only when
someone listens, after the plan is in the log (fsynced under `always`), in plan order, and
nothing for a refusal; a subscriber sees every transition of a job's life over the wire."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from emqd.commit import events
from emqd.commit.queue_events import message
from emqd.config import Config
from emqd.core import Core, Session
from emqd.dispatch import execute
from emqd.persist.aof import AppendOnlyFile
from emqd.serve.lifecycle import Server
from emqd.store.keyspace import Keyspace
from emqd.wire.protocol import Connection
from tests.transports import connection

CHANNEL = b"emq:{q}:events"


# --- the message ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ((events.CLAIMED, b"q", b"7", 5, {"token": b"2", "wait_ms": 3}),
         {"event": "claimed", "id": "7", "ts": 5, "token": "2", "wait_ms": 3}),
        ((events.RETRY, b"q", b"7", 5, {"failures": 1, "due_ms": 1005}),
         {"event": "retry", "id": "7", "ts": 5, "failures": 1, "due_ms": 1005}),
        ((events.PAUSED, b"q", b"", 5, None), {"event": "paused", "ts": 5}),
        ((events.DEAD, b"q", b"7", 5, {"error": "é \n\"".encode()}),
         {"event": "dead", "id": "7", "ts": 5, "error": "é \n\""}),
    ],
)
def test_the_json_of_an_event(event: events.Event, expected: dict) -> None:
    text = message(event)
    assert list(json.loads(text).items()) == list(expected.items())  # fields in this order
    assert text.isascii()


def test_bytes_that_are_not_utf8_round_trip() -> None:
    raw = b"\xff\x00id\xe9"
    got = json.loads(message((events.PROGRESS, b"q", raw, 1, {"value": raw})))
    assert got["id"].encode("utf-8", "surrogateescape") == raw
    assert got["value"].encode("utf-8", "surrogateescape") == raw


# --- in process: when, in which order, after which log offset --------------------------------
def subscriber(server: Server, sent: list, name: str = "sub", resp: int = 2,
               shows: Callable[[bytes], Any] = bytes) -> Connection:
    """A real connection the write path can deliver to, recording what it was sent."""
    sub = connection(server, sent, name, shows=shows)
    sub.session.resp = resp
    server.connections[sub.session.id] = sub
    return sub


def sent_events(sent: list) -> list[str]:
    return [json.loads(data.rsplit(b"\r\n", 2)[-2])["event"] for name, data in sent
            if name == "sub"]


def with_log(tmp_path: Path, policy: str, sent: list) -> Server:
    def fsync(fd: int) -> None:
        sent.append(("fsync", os.fstat(fd).st_size))
        os.fsync(fd)

    keyspace = Keyspace()
    aof = AppendOnlyFile(str(tmp_path / "emqd.aof"), policy, 1 << 40, keyspace, fsync=fsync)
    return Server(Config(dir=str(tmp_path), appendfsync=policy, http_port=0), aof, keyspace)


async def test_under_always_an_event_leaves_after_the_fsync_of_its_plan(tmp_path: Path) -> None:
    sent: list = []
    server = with_log(tmp_path, "always", sent)
    sub = subscriber(server, sent)
    server.core.pubsub.subscribe(sub.session, CHANNEL)
    producer = Session(server.core)
    assert execute(producer, [b"EMQ.ADD", b"q", b"x"]) == b"1"
    assert sent == []  # applied and in the log's buffer, not yet on disk: not told
    await asyncio.sleep(0)  # the end of the loop iteration: write, fsync, then release
    size = os.path.getsize(tmp_path / "emqd.aof")
    assert [name for name, _ in sent] == ["fsync", "sub"] and sent[0] == ("fsync", size)
    assert sent_events(sent) == ["added"]
    server.core.sink.close()


@pytest.mark.parametrize("policy", ["everysec", "no"])
async def test_otherwise_after_its_write_and_without_a_write_of_its_own(
        tmp_path: Path, policy: str) -> None:
    sent: list = []
    server = with_log(tmp_path, policy, sent)
    path = tmp_path / "emqd.aof"
    sub = subscriber(server, sent, shows=lambda data: path.stat().st_size)
    server.core.pubsub.subscribe(sub.session, CHANNEL)
    producer = Session(server.core)
    for payload in (b"a", b"b", b"c"):  # a pipeline's worth of verbs
        execute(producer, [b"EMQ.ADD", b"q", payload])
    assert sent == [] and path.stat().st_size == 0  # the events forced no write(2)
    await asyncio.sleep(0)
    size = path.stat().st_size
    assert size > 0 and sent == [("sub", size)] * 3  # each left once its record was written
    server.core.sink.close()


def test_without_a_log_events_leave_at_once_in_plan_order() -> None:
    sent: list = []
    server = Server(Config(appendonly=False, http_port=0, id_base=0))
    sub = subscriber(server, sent)
    other = subscriber(server, sent, name="pattern", resp=3)
    server.core.pubsub.subscribe(sub.session, CHANNEL)
    server.core.pubsub.psubscribe(other.session, b"emq:{*}:events")
    producer = Session(server.core)
    execute(producer, [b"EMQ.ADD", b"q", b"x", b"MAXATTEMPTS", b"1"])
    execute(producer, [b"EMQ.ADD", b"other", b"x"])  # the pattern's only
    execute(producer, [b"EMQ.CLAIM", b"q", b"1000"])
    execute(producer, [b"EMQ.FAIL", b"q", b"1", b"2", b"ERROR", b"e"])  # refused: stale
    execute(producer, [b"EMQ.FAIL", b"q", b"1", b"1", b"ERROR", b"e"])
    assert sent_events(sent) == ["added", "claimed", "dead"]
    pattern = [data for name, data in sent if name == "pattern"]
    assert len(pattern) == 4 and all(data.startswith(b">4\r\n$8\r\npmessage\r\n")
                                     for data in pattern)
    to_sub = [data for name, data in sent if name == "sub"]
    claimed = json.loads(to_sub[1].rsplit(b"\r\n", 2)[-2])
    assert claimed["token"] == "1" and claimed["id"] == "1"


def test_an_exec_publishes_after_its_record_in_plan_order() -> None:
    sent: list = []
    server = Server(Config(appendonly=False, http_port=0, id_base=0))
    sub = subscriber(server, sent)
    server.core.pubsub.subscribe(sub.session, CHANNEL)
    producer = Session(server.core)
    execute(producer, [b"MULTI"])
    for argv in ([b"EMQ.ADD", b"q", b"x"], [b"EMQ.CLAIM", b"q", b"1000"],
                 [b"EMQ.COMPLETE", b"q", b"1", b"1"]):
        assert execute(producer, argv) == "QUEUED"
    assert sent == []
    execute(producer, [b"EXEC"])
    assert sent_events(sent) == ["added", "claimed", "completed"]


def test_nobody_listening_formats_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from emqd.commit import queue_events

    def refuse(event: Any) -> bytes:
        raise AssertionError("formatted a message nobody receives")

    monkeypatch.setattr(queue_events, "message", refuse)
    state = Core(Config(appendonly=False))
    state.commit.listen(queue_events.publisher(state.pubsub, state.commit.sink))
    elsewhere = Session(state)
    state.pubsub.subscribe(elsewhere, b"emq:{other}:events")
    execute(Session(state), [b"EMQ.ADD", b"q", b"x"])


# --- over the wire: a job's whole life, in order -----------------------------------------------
def life(client: redis.Redis) -> None:
    """Every transition a job can make, once each, and the queue-wide two."""
    run = client.execute_command
    run("EMQ.ADD", "q", "work")
    run("EMQ.CLAIM", "q", "60000")
    run("EMQ.PROGRESS", "q", "1", "1", "50%")
    run("EMQ.FAIL", "q", "1", "1", "ERROR", "try again", "BACKOFF", "0")
    _until(lambda: client.hget("emq:{q}:job:1", "state") == b"pending")  # promoted
    run("EMQ.CLAIM", "q", "60000")
    run("EMQ.REQUEUE", "q", "1", "2")
    run("EMQ.CLAIM", "q", "1")  # a lease of 1 ms: the sweep counts it
    _until(lambda: client.hget("emq:{q}:job:1", "state") == b"pending", timeout=5)
    run("EMQ.CLAIM", "q", "60000")
    run("EMQ.FAIL", "q", "1", "4", "ERROR", "boom", "MAXATTEMPTS", "1")
    run("EMQ.REVIVE", "q", "1")
    run("EMQ.CLAIM", "q", "60000")
    run("EMQ.COMPLETE", "q", "1", "5", "RESULT", "ok")
    run("EMQ.REMOVE", "q", "1")
    run("EMQ.PAUSE", "q")
    run("EMQ.RESUME", "q")


LIFE = ["added", "claimed", "progress", "retry", "promoted", "claimed", "recovered", "claimed",
        "stalled", "claimed", "dead", "revived", "claimed", "completed", "removed", "paused",
        "resumed"]


def _until(condition: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def _check_life(messages: list[dict]) -> None:
    assert [m["event"] for m in messages] == LIFE
    assert all(m.get("id") == "1" for m in messages[:-2])
    assert "id" not in messages[-1] and "id" not in messages[-2]
    assert [m["token"] for m in messages if m["event"] == "claimed"] == ["1", "2", "3", "4", "5"]
    by_event = {m["event"]: m for m in messages}
    assert by_event["progress"]["value"] == "50%"
    assert by_event["retry"]["failures"] == 1
    assert by_event["retry"]["due_ms"] == by_event["retry"]["ts"]  # BACKOFF 0
    assert by_event["dead"]["error"] == "boom"
    stamps = [m["ts"] for m in messages]
    assert stamps == sorted(stamps)


def test_a_subscriber_sees_a_jobs_whole_life_in_order(r: redis.Redis, emqd_port: int) -> None:
    with redis.Redis(port=emqd_port) as listening:
        pubsub = listening.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(CHANNEL)
        _until(lambda: r.pubsub_numsub(CHANNEL) == [(CHANNEL, 1)])
        life(r)
        messages: list[dict] = []
        deadline = time.monotonic() + 5
        while len(messages) < len(LIFE) and time.monotonic() < deadline:
            got = pubsub.get_message(timeout=0.1)
            if got is not None:
                assert got["channel"] == CHANNEL
                messages.append(json.loads(got["data"]))
        pubsub.close()
    _check_life(messages)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_redis_cli_subscribe_shows_it_too(r: redis.Redis, emqd_port: int) -> None:
    cli = subprocess.Popen(["redis-cli", "-p", str(emqd_port), "SUBSCRIBE", CHANNEL.decode()],
                           stdout=subprocess.PIPE, text=True)
    assert cli.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(cli.stdout.readline, "")),
                              daemon=True)
    reader.start()
    try:
        _until(lambda: r.pubsub_numsub(CHANNEL) == [(CHANNEL, 1)])
        life(r)
        _until(lambda: len(lines) >= 3 + 3 * len(LIFE), timeout=5)
    finally:
        cli.kill()
        cli.wait(timeout=5)
        reader.join(timeout=5)
        cli.stdout.close()
    words = [line.rstrip("\n") for line in lines]
    assert words[:3] == ["subscribe", CHANNEL.decode(), "1"]
    rest = words[3:3 + 3 * len(LIFE)]
    assert rest[0::3] == ["message"] * len(LIFE) and rest[1::3] == [CHANNEL.decode()] * len(LIFE)
    _check_life([json.loads(text) for text in rest[2::3]])
