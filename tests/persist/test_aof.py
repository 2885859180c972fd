"""The open log and the write path, in process: records before replies, group commit,
fsync policies, a disk that refuses writes, and the round trip of a restart."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from pathlib import Path
from typing import Any

import pytest

from emqd import dispatch, errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Session
from emqd.persist.aof import AppendOnlyFile, open_log
from emqd.persist.records import BIG_ARG, batch_record, joined, record
from emqd.serve.lifecycle import Server
from emqd.store.keyspace import Keyspace
from tests.persist.helpers import RandomPlans, dump, dump_file
from tests.transports import RecordingTransport, connection

HSET_K = b"*4\r\n$4\r\nHSET\r\n$1\r\nk\r\n$1\r\nf\r\n$1\r\nv\r\n"


class Disk:
    """os.write and os.fsync that can be made to refuse (a full disk), recording fsyncs."""

    def __init__(self, events: list | None = None) -> None:
        self.events = events
        self.full = False
        self.room = -1  # bytes still accepted before refusing (-1: none, when full)

    def write(self, fd: int, data: Any) -> int:
        if self.full:
            if self.room <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            data = data[: self.room]
            self.room -= len(data)
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.events is not None:
            self.events.append(("fsync", os.fstat(fd).st_size))
        if self.fsync_fails:
            self.fsync_fails -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)

    fsync_fails = 0  # fsyncs of the file still to refuse (EIO)
    dir_fails = 0  # ... of its directory

    def fsync_dir(self, fd: int) -> None:
        """The log's directory's fsync (a new name, a compaction's rename)."""
        if self.dir_fails:
            self.dir_fails -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)

    def exit(self, status: int) -> None:
        """os._exit's stand-in: what a failed fsync under `always` does."""
        if self.events is not None:
            self.events.append(("exit", status))


def server_with_log(tmp_path: Path, policy: str, disk: Disk) -> tuple[Server, AppendOnlyFile]:
    keyspace = Keyspace()
    aof = AppendOnlyFile(str(tmp_path / "emqd.aof"), policy, 1 << 40, keyspace,
                         fsync=disk.fsync, write=disk.write, exit=disk.exit,
                         fsync_dir=disk.fsync_dir)
    server = Server(Config(dir=str(tmp_path), appendfsync=policy), aof, keyspace)
    return server, aof


def commit(server: Server, *ops: tuple) -> None:
    server.commit.apply(Plan(list(ops)))


async def test_always_holds_replies_until_one_fsync_covers_the_iteration(tmp_path: Path) -> None:
    events: list = []
    server, aof = server_with_log(tmp_path, "always", Disk(events))
    a, b = connection(server, events, "a"), connection(server, events, "b")
    commit(server, (b"HSET", b"k1", b"f", b"v"))
    a.send(b":1\r\n")
    commit(server, (b"HSET", b"k2", b"f", b"v"), (b"DEL", b"k1"))
    b.send(b":2\r\n")
    a.send(b"+PONG\r\n")  # a read behind a write waits too
    assert events == []
    await asyncio.sleep(0)  # the end of the loop iteration
    size = os.path.getsize(tmp_path / "emqd.aof")
    assert events == [("fsync", size), ("a", b":1\r\n"), ("b", b":2\r\n"), ("a", b"+PONG\r\n")]
    a.send(b"+PONG\r\n")  # nothing logged since: straight out
    assert events[-1] == ("a", b"+PONG\r\n") and a.holding == 0
    aof.close()


async def test_a_failed_fsync_under_always_stops_the_process_and_releases_nothing(
        tmp_path: Path) -> None:
    # The kernel may mark what failed to reach the disk as clean, so a later fsync that
    # succeeds proves nothing: Redis exits, and so does emqd, before any reply leaves.
    events: list = []
    disk = Disk(events)
    server, aof = server_with_log(tmp_path, "always", disk)
    a = connection(server, events, "a")
    disk.fsync_fails = 1
    commit(server, (b"HINCRBY", b"c", b"n", 1))
    a.send(b":1\r\n")
    await asyncio.sleep(0)
    assert ("exit", 1) in events
    assert not any(event[0] == "a" for event in events)
    aof.close()


async def test_a_failed_fsync_under_no_is_retried_until_one_succeeds(tmp_path: Path) -> None:
    # `no` never fsyncs on its own; after SAVE's fsync failed, the retry must try it
    # again, or writes stay refused (MISCONF) for ever.
    disk = Disk()
    server, aof = server_with_log(tmp_path, "no", disk)
    commit(server, (b"HSET", b"k", b"f", b"v"))
    disk.fsync_fails = 1
    assert not aof.save() and aof.failing is not None
    for _ in range(300):  # the retry SAVE arms, a second later, fsyncs again
        if aof.failing is None:
            break
        await asyncio.sleep(0.01)
    assert aof.failing is None and aof.synced == aof.written
    aof.close()


@pytest.mark.parametrize("policy", ["always", "everysec"])
async def test_a_compaction_whose_rename_is_not_durable_releases_nothing_until_it_is(
        tmp_path: Path, policy: str) -> None:
    # A power cut could undo the rename, and the records after it (in the new file
    # only) with it: they are not synced (under `always` their replies wait), and
    # writes are refused, until a directory fsync succeeds.
    events: list = []
    disk = Disk(events)
    server, aof = server_with_log(tmp_path, policy, disk)
    commit(server, (b"HSET", b"k", b"f", b"v"))
    assert aof.flush()
    disk.dir_fails = 10**6  # until the disk is told to take it
    assert aof.start_rewrite()
    for _ in range(1000):
        if aof.rewrite is None:
            break
        await asyncio.sleep(0.001)
    assert aof.last_rewrite_ok and aof.failing is not None and aof.dir_unsynced
    commit(server, (b"HSET", b"k", b"g", b"w"))
    a = connection(server, events, "a")
    a.session.log_mark = aof.appended  # as dispatch marks a write's client
    a.send(b":1\r\n")
    await asyncio.sleep(0)
    assert aof.synced < aof.written and aof.failing is not None
    assert any(event[0] == "a" for event in events) == (policy != "always")
    disk.dir_fails = 0
    server.commit.flush()  # the retry: the directory is fsynced now, the reply goes
    assert aof.failing is None and not aof.dir_unsynced and aof.synced == aof.written
    assert ("a", b":1\r\n") in events
    aof.close()


async def test_always_commits_at_once_for_a_connection_about_to_close(tmp_path: Path) -> None:
    events: list = []
    server, aof = server_with_log(tmp_path, "always", Disk(events))
    conn = connection(server, events, "c")
    commit(server, (b"HSET", b"k", b"f", b"v"))
    conn.session.close_after_reply = True  # QUIT after the HSET in one pipeline
    conn.send(b":1\r\n+OK\r\n")
    assert [name for name, _ in events] == ["fsync", "c"]
    aof.close()


@pytest.mark.parametrize("policy", ["everysec", "no"])
async def test_other_policies_write_the_record_before_the_reply_and_hold_nothing(
    tmp_path: Path, policy: str
) -> None:
    events: list = []
    server, aof = server_with_log(tmp_path, policy, Disk())
    conn = connection(server, events, "c")
    path = tmp_path / "emqd.aof"
    commit(server, (b"HSET", b"k", b"f", b"v"))
    conn.session.log_mark = aof.appended  # what the dispatcher notes for the writing client
    # the file's size when the reply goes out
    conn.transport = RecordingTransport(events, "reply", lambda _: path.stat().st_size)
    conn.send(b":1\r\n")
    assert events == [("reply", len(HSET_K))] and conn.holding == 0
    aof.close()


async def test_records_no_reply_asks_for_are_written_at_the_end_of_the_iteration(
        tmp_path: Path) -> None:
    server, aof = server_with_log(tmp_path, "everysec", Disk())
    commit(server, (b"HSET", b"k", b"f", b"v"))  # housekeeping's plan: nobody waits for it
    assert os.path.getsize(tmp_path / "emqd.aof") == 0
    await asyncio.sleep(0)
    assert os.path.getsize(tmp_path / "emqd.aof") == len(HSET_K)
    aof.close()


async def test_everysec_fsyncs_in_the_background_within_about_a_second(tmp_path: Path) -> None:
    events: list = []
    server, aof = server_with_log(tmp_path, "everysec", Disk(events))
    commit(server, (b"HSET", b"k", b"f", b"v"))
    await asyncio.sleep(0)
    deadline = time.monotonic() + 3
    while aof.synced != aof.written and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert aof.synced == aof.written
    assert ("fsync", os.path.getsize(tmp_path / "emqd.aof")) in events
    aof.close()


# --- a disk that refuses: writes refused (MISCONF), reads served, nothing lost ------------
@pytest.mark.parametrize("policy", ["always", "everysec"])
async def test_a_full_disk_refuses_writes_and_recovers_by_itself(tmp_path: Path,
                                                                 policy: str) -> None:
    events: list = []
    disk = Disk()
    server, aof = server_with_log(tmp_path, policy, disk)
    session = Session(server.core)
    writer, reader = connection(server, events, "w", session), connection(server, events, "r")
    assert dispatch.execute(session, [b"HSET", b"k", b"a", b"1"]) == 1
    writer.send(b":1\r\n")
    await asyncio.sleep(0)
    assert events == [("w", b":1\r\n")]
    disk.full, disk.room = True, 10  # the next record goes in partly, then the disk is full
    assert dispatch.execute(session, [b"HSET", b"k", b"b", b"2"]) == 1
    writer.send(b":1\r\n")  # not in the file: must wait
    writer.send(b"$1\r\n1\r\n")  # behind it on its connection
    await asyncio.sleep(0)
    assert events == [("w", b":1\r\n")] and writer.holding == 2
    refused = dispatch.execute(session, [b"HSET", b"k", b"c", b"3"])
    assert refused == errors.misconf(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert refused.message == b"MISCONF Errors writing to the AOF file: No space left on device"
    assert dispatch.execute(session, [b"EMQ.ADD", b"q", b"p"]) == refused
    assert dispatch.execute(session, [b"HGET", b"k", b"b"]) == b"2"  # reads are served
    reader.send(b"$1\r\n2\r\n")  # and sent: no write to wait for
    assert events[-1] == ("r", b"$1\r\n2\r\n")
    info: dict = aof.info()
    assert info["aof_last_write_status"] == "err"
    disk.full = False  # space comes back: the retry, a second later, writes the rest
    deadline = time.monotonic() + 3
    while writer.holding and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert events[-2:] == [("w", b":1\r\n"), ("w", b"$1\r\n1\r\n")]
    assert aof.info()["aof_last_write_status"] == "ok"
    assert dispatch.execute(session, [b"HSET", b"k", b"c", b"3"]) == 1
    server.commit.flush()
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == {
        b"k": ("hash", {b"a": b"1", b"b": b"2", b"c": b"3"})}


class CountingDisk(Disk):
    """A Disk that keeps what each write(2) was handed: a big value must go as itself."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[Any] = []

    def write(self, fd: int, data: Any) -> int:
        self.handed.append(data)
        return super().write(fd, data)


@pytest.mark.parametrize("room", [-1, 5, BIG_ARG + 100])  # all of it; a few bytes; inside it
async def test_a_big_value_is_written_from_itself_even_across_a_full_disk(
        tmp_path: Path, room: int) -> None:
    disk = CountingDisk()
    server, aof = server_with_log(tmp_path, "everysec", disk)
    value = os.urandom(BIG_ARG * 3)
    plan = Plan([(b"HSET", b"big", b"f", value), (b"HSET", b"k", b"f", b"v")])
    assert isinstance(record(plan), list)  # the record is its parts, never joined
    if room >= 0:
        disk.full, disk.room = True, room
    server.core.commit.apply(plan)
    commit(server, (b"DEL", b"k"))
    assert aof.write() is (room < 0)
    disk.full = False
    assert aof.write()
    assert aof.written == aof.appended == os.path.getsize(tmp_path / "emqd.aof")
    # the value reached write(2) as the stored object itself (or a view of it), no copy
    assert any(memoryview(piece).obj is value for piece in disk.handed)
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == {b"big": ("hash", {b"f": value})}


def test_a_record_with_a_big_value_reads_as_the_joined_one() -> None:
    value = b"x" * BIG_ARG
    ops = [(b"HSET", b"h", b"f", value), (b"ZADD", b"z", 1, b"m")]
    parts = record(Plan(ops))
    assert isinstance(parts, list) and value in parts
    assert joined(parts) == b"".join(
        [b"*1\r\n$5\r\nMULTI\r\n", b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n",
         b"$%d\r\n" % len(value), value, b"\r\n",
         b"*4\r\n$4\r\nZADD\r\n$1\r\nz\r\n$1\r\n1\r\n$1\r\nm\r\n", b"*1\r\n$4\r\nEXEC\r\n"])
    assert isinstance(record(Plan([(b"HSET", b"h", b"f", value[:-1])])), bytes)
    assert isinstance(batch_record([Plan(ops), Plan([(b"DEL", b"h")])]), list)


@pytest.mark.parametrize("seed", range(3))
async def test_what_was_committed_is_what_a_restart_loads(tmp_path: Path, seed: int) -> None:
    config = Config(dir=str(tmp_path), appendfsync="no")
    keyspace = Keyspace()
    aof = open_log(config, keyspace)
    state = Server(config, aof, keyspace).core
    plans = RandomPlans(seed)
    for i in range(300):
        if i % 10 == 0:  # an EXEC: several plans, one record
            state.commit.begin_batch()
            for _ in range(3):
                state.commit.apply(Plan(plans.plan()))
            state.commit.end_batch()
        else:
            state.commit.apply(Plan(plans.plan()))
        if i % 7 == 0:
            await asyncio.sleep(0)
    expected = dump(state.keyspace)
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == expected
    loaded = Keyspace()
    again_log = open_log(config, loaded)
    again = Server(config, again_log, loaded).core
    again_log.close()
    assert dump(again.keyspace) == expected
    assert again.run_id != state.run_id  # a new epoch, whatever the file held


async def test_persistence_info_reports_the_log(tmp_path: Path) -> None:
    config = Config(dir=str(tmp_path), appendfsync="no")
    keyspace = Keyspace()
    aof = open_log(config, keyspace)
    server = Server(config, aof, keyspace)
    commit(server, (b"HSET", b"k", b"f", b"v"))
    aof.write()
    info: dict = server.core.sink.info()
    assert info["aof_enabled"] == 1
    assert info["aof_rewrite_in_progress"] == 0
    assert info["aof_current_size"] == os.path.getsize(tmp_path / "emqd.aof") > 0
    assert info["aof_base_size"] == 0
    assert info["aof_last_bgrewrite_status"] == "ok"
    assert info["aof_last_write_status"] == "ok"
    aof.close()


# --- CONFIG SET appendfsync / auto-aof-rewrite-min-size at run time ---------------------
async def test_a_new_fsync_policy_holds_the_next_reply_as_that_policy_says(tmp_path: Path) -> None:
    events: list = []
    server, aof = server_with_log(tmp_path, "everysec", Disk(events))
    thread = aof._thread
    assert thread is not None and thread.is_alive()
    conn = connection(server, events, "c")
    server.core.reconfigure({"appendfsync": "always"})
    assert aof.always and aof._thread is None
    thread.join(timeout=3)
    assert not thread.is_alive()  # the everysec thread stopped by itself
    commit(server, (b"HSET", b"k", b"f", b"v"))
    conn.send(b":1\r\n")
    assert events == []  # held for the fsync
    await asyncio.sleep(0)
    assert events == [("fsync", len(HSET_K)), ("c", b":1\r\n")]
    server.core.reconfigure({"appendfsync": "no"})
    commit(server, (b"HSET", b"k", b"f", b"w"))
    conn.session.log_mark = aof.appended
    conn.send(b":0\r\n")
    await asyncio.sleep(0)
    assert events[2:] == [("c", b":0\r\n")] and aof.synced < aof.written  # written, no fsync
    server.core.reconfigure({"appendfsync": "everysec", "aof_rewrite_min_size": 1024})
    assert aof._thread is not None and aof.rewrite_min_size == 1024
    deadline = time.monotonic() + 3
    while aof.synced != aof.written and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert aof.synced == aof.written  # the new thread fsyncs what `no` left
    aof.close()
    assert aof._thread is not None and not aof._thread.is_alive()  # close() joined it
