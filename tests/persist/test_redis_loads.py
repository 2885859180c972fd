"""Redis 7 loads emqd's file as its own append-only file and ends with the same keyspace.

Redis 7.0 keeps a manifest and a directory of parts; given a plain
`appendfilename` file in `--dir` and no manifest, it takes the file as its base
(the upgrade path from Redis 6), which is how these tests hand it ours.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import redis

from tests.persist.helpers import RandomPlans, dump_file, redis_dump, write_file
from tests.support import RawClient, redis_server_path, send_shutdown, start_emqd, start_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis_reference]


@pytest.fixture(autouse=True)
def need_redis() -> None:
    if redis_server_path() is None:
        if os.environ.get("EMQD_REQUIRE_REDIS") == "1":
            pytest.fail("EMQD_REQUIRE_REDIS=1 but redis-server is not installed")
        pytest.skip("REDIS-SERVER NOT INSTALLED: Redis cannot load emqd's file here")


def as_redis_loads_it(path: Path, scratch: Path) -> dict:
    scratch.mkdir()
    shutil.copy(path, scratch / "emqd.aof")
    server = start_redis("--appendonly", "yes", "--appendfilename", "emqd.aof", dir=str(scratch))
    try:
        with redis.Redis(port=server.port) as client:
            # Redis listens before it loads, and shows aof_enabled:0 while loading.
            deadline = time.monotonic() + 20
            while client.info("persistence")["loading"] and time.monotonic() < deadline:
                time.sleep(0.01)
            assert client.info("persistence")["aof_enabled"] == 1
            return redis_dump(client)
    finally:
        server.stop()


def test_redis_loads_every_op_and_value_emqd_writes(tmp_path: Path) -> None:
    path = tmp_path / "emqd.aof"
    write_file(str(path), RandomPlans(11, keys=30).plans(1500))
    ours = dump_file(str(path))
    assert any(kind == "zset" for kind, _ in ours.values())
    assert as_redis_loads_it(path, tmp_path / "redis") == ours


def until_rewritten(path: Path, inode: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.stat().st_ino != inode and not Path(str(path) + ".rewrite.tmp").exists():
            return
        time.sleep(0.01)
    raise AssertionError("the rewrite did not finish")


def test_redis_loads_a_queue_written_by_emqd_before_and_after_compaction(tmp_path: Path) -> None:
    data = tmp_path / "emqd"
    data.mkdir()
    path = data / "emqd.aof"
    # Retries due in 10 minutes: a restart more than a second later (a loaded
    # machine) must not promote the FAILed jobs and change the file under test.
    flags = ("--appendonly", "yes", "--stalled-interval", "0", "--backoff", "fixed:600000")
    server = start_emqd(*flags, dir=str(data))
    try:
        with redis.Redis(port=server.port) as r:
            r.hset("plain", mapping={"a": "1", "b": "\r\n"})
            r.hset("flushed", "x", "y")
            r.flushall()
            for i in range(30):
                r.execute_command("EMQ.ADD", "q", f"payload {i}", "PRIORITY", i % 3 - 1)
            r.execute_command("EMQ.ADD", "q", "later", "DELAY", 600000)
            for i in range(12):
                job = r.execute_command("EMQ.CLAIM", "q", 60000 if i % 4 else 1)
                if i % 4 == 1:
                    r.execute_command("EMQ.COMPLETE", "q", job[0], job[1], "RESULT", "ok")
                elif i % 4 == 2:
                    r.execute_command("EMQ.FAIL", "q", job[0], job[1], "ERROR", "boom")
                elif i % 4 == 3:
                    r.execute_command("EMQ.REQUEUE", "q", job[0], job[1])
            time.sleep(0.01)
            r.execute_command("EMQ.STALLED.CHECK", "q")
            pipe = r.pipeline(transaction=True)
            pipe.hset("t", "f", "1")
            pipe.execute_command("EMQ.ADD", "q", "in multi")
            pipe.execute()
            send_shutdown(server.port)
    finally:
        server.stop()
    ours = dump_file(str(path))
    assert b"emq:{q}:pending" in ours and b"flushed" not in ours
    assert as_redis_loads_it(path, tmp_path / "redis-log") == ours

    server = start_emqd(*flags, dir=str(data))
    try:
        with redis.Redis(port=server.port) as r:
            inode = path.stat().st_ino
            raw = RawClient(server.port)
            started = raw.command("BGREWRITEAOF")
            assert started == b"+Background append only file rewriting started\r\n"
            raw.close()
            until_rewritten(path, inode)
            send_shutdown(server.port)
    finally:
        server.stop()
    assert dump_file(str(path)) == ours
    assert as_redis_loads_it(path, tmp_path / "redis-rewritten") == ours
