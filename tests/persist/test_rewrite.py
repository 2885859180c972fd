"""Compaction in process: the new file rebuilds the keyspace, whatever is written meanwhile."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import hiredis
import pytest

from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core
from emqd.persist import rewrite as rewrite_module
from emqd.persist import values as values_module
from emqd.persist.aof import TEMP_SUFFIX, AppendOnlyFile, open_log
from emqd.serve.lifecycle import Server
from emqd.store.keyspace import Keyspace
from tests.persist.helpers import RandomPlans, dump, dump_file


def commands_of(path: Path) -> list[list[bytes]]:
    reader = hiredis.Reader()
    reader.feed(path.read_bytes())
    out = []
    while (cmd := reader.gets()) is not False:
        out.append(cmd)
    return out


async def until_done(aof: AppendOnlyFile, steps: int = 100_000) -> None:
    for _ in range(steps):
        if aof.rewrite is None:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the rewrite did not finish")


def apply(plan: Plan) -> None:
    """Through the commit path of the core `opened` made last."""
    _opened[-1].commit.apply(plan)


_opened: list[Core] = []


def opened(tmp_path: Path, **settings: object) -> tuple[Core, AppendOnlyFile]:
    config = Config(dir=str(tmp_path), appendfsync="no", **settings)  # type: ignore[arg-type]
    keyspace = Keyspace()
    aof = open_log(config, keyspace)
    return Server(config, aof, keyspace).core, aof


def fill(state: Core) -> None:
    """Small hashes, a hash and a sorted set bigger than a slice, history to compact away."""
    for i in range(300):
        state.commit.apply(Plan([(b"HSET", b"h:%d" % i, b"state", b"old", b"n", b"%d" % i)]))
        state.commit.apply(Plan([(b"HSET", b"h:%d" % i, b"state", b"pending")]))
    apply = state.commit.apply
    apply(Plan([(b"ZADD", b"z:0", *[x for i in range(900) for x in (i / 3, b"m%d" % i)])]))
    apply(Plan([(b"HSET", b"z:big-hash", *[x for i in range(700) for x in (b"f%d" % i, b"v")])]))
    apply(Plan([(b"ZADD", b"z:inf", float("inf"), b"a", float("-inf"), b"b", -0.0, b"c")]))


@pytest.fixture(autouse=True)
def small_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite_module, "SLICE_ITEMS", 97)
    monkeypatch.setattr(rewrite_module, "ITEMS_PER_COMMAND", 41)  # its slices' whole commands
    monkeypatch.setattr(values_module, "ITEMS_PER_COMMAND", 41)  # the commands themselves


async def test_the_new_file_is_the_shortest_commands_for_the_keyspace(tmp_path: Path) -> None:
    state, aof = opened(tmp_path)
    fill(state)
    aof.write()
    before = os.path.getsize(tmp_path / "emqd.aof")
    assert aof.start_rewrite()
    await until_done(aof)
    path = tmp_path / "emqd.aof"
    assert dump_file(str(path)) == dump(state.keyspace)
    assert os.path.getsize(path) < before
    commands = commands_of(path)
    assert {cmd[0] for cmd in commands} == {b"HSET", b"ZADD"}
    per_key: dict[bytes, int] = {}
    for cmd in commands:
        per_key[cmd[1]] = per_key.get(cmd[1], 0) + 1
        assert len(cmd) <= 2 + 2 * 41
    assert per_key[b"h:7"] == 1 and per_key[b"z:0"] == 22 and per_key[b"z:big-hash"] == 18
    assert not (tmp_path / ("emqd.aof" + TEMP_SUFFIX)).exists()
    assert aof.rewrites == 1 and aof.base_size == aof.size == os.path.getsize(path)
    # The log goes on in the new file.
    state.commit.apply(Plan([(b"DEL", b"h:1")]))
    aof.close()
    assert dump_file(str(path)) == dump(state.keyspace)


@pytest.mark.parametrize("seed, flushall_at", [(0, None), (1, None), (2, 5), (3, 20)])
async def test_writes_during_the_rewrite_are_in_the_new_file(
    tmp_path: Path, seed: int, flushall_at: int | None
) -> None:
    state, aof = opened(tmp_path)
    plans = RandomPlans(seed, keys=40)
    for ops in plans.plans(200):
        state.commit.apply(Plan(ops))
    fill(state)  # h:0.., z:0..: keys the random plans go on writing
    assert aof.start_rewrite()
    path = str(tmp_path / "emqd.aof")
    steps = 0
    while aof.rewrite is not None:
        for ops in plans.plans(3):
            kept = [op for op in ops if op[0] != b"FLUSHALL"] or [(b"DEL", b"h:0")]
            state.commit.apply(Plan(kept))
        if steps == flushall_at:
            state.commit.apply(Plan([(b"FLUSHALL",)]))
            state.commit.apply(Plan([(b"HSET", b"h:0", b"after", b"flush")]))
        aof.write()
        assert dump_file(path) == dump(state.keyspace), steps  # a crash now loses nothing
        await asyncio.sleep(0)
        steps += 1
        assert steps < 10_000
    assert steps > 10  # the writes did overlap the rewrite
    assert aof.last_rewrite_ok
    assert dump_file(path) == dump(state.keyspace)
    aof.close()
    assert dump_file(path) == dump(state.keyspace)


async def test_hincrby_during_the_rewrite_is_counted_once(tmp_path: Path) -> None:
    state, aof = opened(tmp_path)
    for i in range(500):
        state.commit.apply(Plan([(b"HINCRBY", b"c:%d" % i, b"count", 5)]))
    assert aof.start_rewrite()
    for i in range(500):
        state.commit.apply(Plan([(b"HINCRBY", b"c:%d" % (499 - i), b"count", 1)]))
        if i % 50 == 0:
            await asyncio.sleep(0)
    await until_done(aof)
    aof.close()
    loaded = dump_file(str(tmp_path / "emqd.aof"))
    assert {value[1][b"count"] for value in loaded.values()} == {b"6"}


async def test_the_file_is_compacted_when_it_doubles_past_the_minimum(tmp_path: Path) -> None:
    state, aof = opened(tmp_path, aof_rewrite_min_size=20_000)
    for i in range(2000):
        state.commit.apply(Plan([(b"HSET", b"counter", b"n", b"%d" % i)]))
        if i % 20 == 0:
            await asyncio.sleep(0)
    await until_done(aof)
    assert aof.rewrites >= 1
    assert aof.size < aof.written  # the file is shorter than what was appended to it
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == {b"counter": ("hash", {b"n": b"1999"})}


async def test_a_failed_rewrite_leaves_the_current_file_in_use(tmp_path: Path) -> None:
    state, aof = opened(tmp_path)
    fill(state)
    assert aof.start_rewrite()
    rewrite = aof.rewrite
    assert rewrite is not None
    os.close(rewrite.fd)  # the next write to the temp file fails
    rewrite.fd = os.open(os.devnull, os.O_RDONLY)
    await until_done(aof)
    assert aof.last_rewrite_ok is False
    assert aof.info()["aof_last_bgrewrite_status"] == "err"
    assert not (tmp_path / ("emqd.aof" + TEMP_SUFFIX)).exists()
    state.commit.apply(Plan([(b"HSET", b"after", b"f", b"v")]))
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == dump(state.keyspace)


BIG_ZSET = (b"ZADD", b"big", *[x for i in range(1000) for x in (i, b"m%d" % i)])
BIG_HASH = (b"HSET", b"big", *[x for i in range(1000) for x in (b"f%d" % i, b"1")])


@pytest.mark.parametrize("big, change", [
    (BIG_HASH, [(b"HINCRBY", b"big", b"f999", 5)]),  # counted once, not twice
    (BIG_HASH, [(b"HDEL", b"big", b"f998"), (b"HSET", b"big", b"f999", b"x", b"new", b"y")]),
    (BIG_ZSET, [(b"ZREM", b"big", b"m999"), (b"ZADD", b"big", -1, b"m998")]),
    (BIG_ZSET, [(b"DEL", b"big")]),
    (BIG_ZSET, [(b"FLUSHALL",), (b"ZADD", b"big", 1, b"only")]),
])
async def test_a_big_value_changed_while_it_is_written_is_written_as_it_was(
    tmp_path: Path, big: tuple, change: list
) -> None:
    state, aof = opened(tmp_path)
    state.commit.apply(Plan([big]))
    assert aof.start_rewrite()
    await asyncio.sleep(0)  # the first slice: the big value is being written from the live one
    rewrite = aof.rewrite
    assert rewrite is not None and rewrite._current_live is not None
    state.commit.apply(Plan(change))
    await until_done(aof)
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof")) == dump(state.keyspace)


async def test_no_rewrite_starts_while_records_wait_for_the_disk(tmp_path: Path) -> None:
    # The snapshot would hold their effects, and the records, written once the disk
    # has room again, would follow it in the new file: an HINCRBY counted twice.
    state, aof = opened(tmp_path)
    state.commit.apply(Plan([(b"HINCRBY", b"c", b"n", 1)]))
    assert aof.flush()
    full = [True]

    def disk(fd: int, data: bytes) -> int:
        if full[0]:
            raise OSError(28, "No space left on device")
        return os.write(fd, data)

    aof._write = disk  # type: ignore[method-assign]
    state.commit.apply(Plan([(b"HINCRBY", b"c", b"n", 1)]))
    assert not aof.flush() and aof.failing is not None
    assert not aof.start_rewrite()
    assert aof.rewrite is None
    full[0] = False
    assert aof.flush()  # the held record goes in: now a rewrite may start
    assert aof.start_rewrite()
    await until_done(aof)
    assert aof.last_rewrite_ok
    aof.close()
    assert dump_file(str(tmp_path / "emqd.aof"))[b"c"][1] == {b"n": b"2"}


async def test_a_partial_write_starts_no_rewrite_of_its_own(tmp_path: Path) -> None:
    # Past the automatic threshold, a write the disk cut short must not start the
    # compaction from its error path, with the rest of the record still unwritten.
    state, aof = opened(tmp_path, aof_rewrite_min_size=1)
    aof.base_size = 0
    written = [0]

    def half(fd: int, data: bytes) -> int:
        if written[0]:
            raise OSError(28, "No space left on device")
        written[0] = os.write(fd, bytes(data[: len(data) // 2]))
        return written[0]

    aof._write = half  # type: ignore[method-assign]
    state.commit.apply(Plan([(b"HINCRBY", b"c", b"n", 1)]))
    assert not aof.flush()
    assert aof.rewrite is None and aof.unwritten
    aof.close()
