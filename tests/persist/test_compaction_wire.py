"""Compaction on a real emqd: while clients write, and with a kill -9 in the middle of it."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from emqd.persist.aof import TEMP_SUFFIX
from tests.persist.helpers import Dump, dump_file, encode_records
from tests.support import RawClient, ServerProcess, send_shutdown, start_emqd

pytestmark = pytest.mark.slow

KEYS = 30_000
FLAGS = ("--appendonly", "yes", "--appendfsync", "always", "--stalled-interval", "0")


def big_file(path: Path) -> Dump:
    """KEYS hashes written twice (history to compact away) and a big sorted set."""
    plans = []
    for i in range(KEYS):
        key = b"k:%d" % i
        plans.append([(b"HSET", key, b"state", b"pending", b"payload", b"x" * 40)])
        plans.append([(b"HSET", key, b"state", b"done"), (b"ZADD", b"z", i, b"%d" % i)])
    path.write_bytes(encode_records(plans))
    return dump_file(str(path))


class Writer(threading.Thread):
    """Writes its own keys in a bounded loop; `ops[:acked]` were acknowledged."""

    def __init__(self, port: int, n: int) -> None:
        super().__init__()
        self.port = port
        self.ops = [
            ("hset", f"w{n}:{i % 50}", f"f{i % 7}", str(i)) if i % 3 else ("del", f"k:{n + 7 * i}")
            for i in range(20_000)
        ]
        self.acked = 0
        self.stop = threading.Event()

    def run(self) -> None:
        # No retries: after a kill the next command must fail, not reconnect.
        client = redis.Redis(port=self.port, socket_timeout=10, retry=Retry(NoBackoff(), 0))
        try:
            for op in self.ops:
                if self.stop.is_set():
                    return
                if op[0] == "hset":
                    client.hset(op[1], op[2], op[3])
                else:
                    client.delete(op[1])
                self.acked += 1
        except (redis.ConnectionError, redis.TimeoutError):
            return
        finally:
            client.close()

    def model(self, base: Dump, count: int) -> Dump:
        out = dict(base)
        for op in self.ops[:count]:
            key = op[1].encode()
            if op[0] == "del":
                out.pop(key, None)
            else:
                kind, fields = out.get(key, ("hash", {}))
                out[key] = (kind, {**fields, op[2].encode(): op[3].encode()})
        return out


def rewrite(server: ServerProcess) -> None:
    raw = RawClient(server.port)
    assert raw.command("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
    raw.close()


def wait_for(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_writes_during_compaction_are_all_in_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "emqd.aof"
    base = big_file(path)
    size_before = path.stat().st_size
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    writers = [Writer(server.port, n) for n in range(2)]
    try:
        for writer in writers:
            writer.start()
        wait_for(lambda: all(w.acked > 20 for w in writers))
        inode = path.stat().st_ino
        rewrite(server)
        wait_for(lambda: path.stat().st_ino != inode)
        during = [w.acked for w in writers]
        wait_for(lambda: all(w.acked > d + 20 for w, d in zip(writers, during, strict=True)))
        for writer in writers:
            writer.stop.set()
            writer.join(timeout=30)
        send_shutdown(server.port)
    finally:
        assert server.stop() == 0
    expected = base
    for writer in writers:
        expected = writer.model(expected, writer.acked)
    assert dump_file(str(path)) == expected
    assert path.stat().st_size < size_before
    assert not Path(str(path) + TEMP_SUFFIX).exists()


def test_a_kill_during_or_after_compaction_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "emqd.aof"
    temp = Path(str(path) + TEMP_SUFFIX)
    expected = big_file(path)
    for moment in ("during", "after"):
        server = start_emqd(*FLAGS, dir=str(tmp_path))
        writer = Writer(server.port, 0 if moment == "during" else 1)
        try:
            writer.start()
            wait_for(lambda w=writer: w.acked > 20)
            inode = path.stat().st_ino
            rewrite(server)
            if moment == "during":
                wait_for(lambda: temp.exists() and temp.stat().st_size > 0)
            else:
                wait_for(lambda old=inode: path.stat().st_ino != old)
            server.kill(signal.SIGKILL)
            assert temp.exists() == (moment == "during")
        finally:
            writer.stop.set()
            writer.join(timeout=30)
            server.stop()
        loaded = dump_file(str(path))
        # Every acknowledged op is there; the one in flight at the kill may be too.
        assert loaded in (writer.model(expected, writer.acked),
                          writer.model(expected, writer.acked + 1)), moment
        expected = loaded
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    try:
        assert not temp.exists()  # the unfinished rewrite's file was removed at start
    finally:
        server.stop()
