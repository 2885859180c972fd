"""The open log, in process: write before reply, group commit, fsync policies, round trip."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from emqd.config import Config
from emqd.persist.aof import AppendOnlyFile, open_log
from emqd.server_state import ServerState
from tests.persist.helpers import RandomPlans, dump, dump_file


class FakeConnection:
    """What the log needs of a connection: a transport to write to, and the QUIT flag."""

    def __init__(self, events: list, name: str) -> None:
        self.closed = False
        self.session = SimpleNamespace(close_after_reply=False)
        self.transport = SimpleNamespace(write=lambda data: events.append((name, data)))


def reply(aof: AppendOnlyFile, conn: FakeConnection, data: bytes) -> None:
    """What Server.write does."""
    if aof.busy and aof.hold(conn, data):  # type: ignore[arg-type]
        return
    conn.transport.write(data)


def log_for(
    tmp_path: Path, policy: str, events: list | None = None
) -> tuple[ServerState, AppendOnlyFile]:
    state = ServerState(Config(dir=str(tmp_path), appendfsync=policy))
    path = str(tmp_path / "emqd.aof")

    def fsync(fd: int) -> None:
        if events is not None:
            events.append(("fsync", os.fstat(fd).st_size))
        os.fsync(fd)

    aof = AppendOnlyFile(path, policy, 1 << 40, state, fsync=fsync)
    state.aof, state.log = aof, aof.log
    return state, aof


async def test_always_holds_replies_until_one_fsync_covers_the_iteration(tmp_path: Path) -> None:
    events: list = []
    state, aof = log_for(tmp_path, "always", events)
    a, b = FakeConnection(events, "a"), FakeConnection(events, "b")
    state.commit([(b"HSET", b"k1", b"f", b"v")])
    reply(aof, a, b":1\r\n")
    state.commit([(b"HSET", b"k2", b"f", b"v"), (b"DEL", b"k1")])
    reply(aof, b, b":2\r\n")
    reply(aof, a, b"+PONG\r\n")  # a read behind a write waits too: order is kept
    assert events == []
    await asyncio.sleep(0)  # the end of the loop iteration
    size = os.path.getsize(tmp_path / "emqd.aof")
    assert events == [("fsync", size), ("a", b":1\r\n"), ("b", b":2\r\n"), ("a", b"+PONG\r\n")]
    assert not aof.busy
    reply(aof, a, b"+PONG\r\n")  # nothing logged since: straight out
    assert events[-1] == ("a", b"+PONG\r\n")
    aof.close()


async def test_always_commits_at_once_for_a_connection_about_to_close(tmp_path: Path) -> None:
    events: list = []
    state, aof = log_for(tmp_path, "always", events)
    conn = FakeConnection(events, "c")
    state.commit([(b"HSET", b"k", b"f", b"v")])
    conn.session.close_after_reply = True  # QUIT after the HSET in one pipeline
    reply(aof, conn, b":1\r\n+OK\r\n")
    assert [name for name, _ in events] == ["fsync", "c"]
    aof.close()


@pytest.mark.parametrize("policy", ["everysec", "no"])
async def test_other_policies_write_the_record_before_the_reply_and_hold_nothing(
    tmp_path: Path, policy: str
) -> None:
    events: list = []
    state, aof = log_for(tmp_path, policy, events)
    conn = FakeConnection(events, "c")
    path = tmp_path / "emqd.aof"
    state.commit([(b"HSET", b"k", b"f", b"v")])
    conn.transport.write = lambda data: events.append(("reply", path.stat().st_size))
    reply(aof, conn, b":1\r\n")
    assert events == [("reply", len(b"*4\r\n$4\r\nHSET\r\n$1\r\nk\r\n$1\r\nf\r\n$1\r\nv\r\n"))]
    aof.close()


async def test_everysec_fsyncs_in_the_background_within_about_a_second(tmp_path: Path) -> None:
    events: list = []
    state, aof = log_for(tmp_path, "everysec", events)
    state.commit([(b"HSET", b"k", b"f", b"v")])
    await asyncio.sleep(0)
    deadline = time.monotonic() + 3
    while aof.synced != aof.written and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert aof.synced == aof.written
    assert ("fsync", os.path.getsize(tmp_path / "emqd.aof")) in events
    aof.close()


@pytest.mark.parametrize("seed", range(3))
async def test_what_was_committed_is_what_a_restart_loads(tmp_path: Path, seed: int) -> None:
    config = Config(dir=str(tmp_path), appendfsync="no")
    state = ServerState(config)
    aof = open_log(config, state)
    plans = RandomPlans(seed)
    for i in range(300):
        if i % 10 == 0:  # an EXEC: several plans, one record
            state.begin_batch()
            for _ in range(3):
                state.commit(plans.plan())
            state.end_batch()
        else:
            state.commit(plans.plan())
        if i % 7 == 0:
            await asyncio.sleep(0)
    expected = dump(state.keyspace)
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == expected
    again = ServerState(config)
    open_log(config, again).close()
    assert dump(again.keyspace) == expected
    assert again.run_id != state.run_id  # a new epoch, whatever the file held


async def test_persistence_info_reports_the_log(tmp_path: Path) -> None:
    config = Config(dir=str(tmp_path), appendfsync="no")
    state = ServerState(config)
    aof = open_log(config, state)
    state.commit([(b"HSET", b"k", b"f", b"v")])
    aof.write_records()
    info: dict = {}
    for fields in state.info_fields["persistence"]:
        info.update(fields())
    assert info["aof_enabled"] == 1
    assert info["aof_rewrite_in_progress"] == 0
    assert info["aof_current_size"] == os.path.getsize(tmp_path / "emqd.aof") > 0
    assert info["aof_base_size"] == 0
    assert info["aof_last_bgrewrite_status"] == "ok"
    aof.close()
