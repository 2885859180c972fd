"""BGREWRITEAOF, SAVE, LASTSAVE and INFO persistence, over the wire."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from emqd import errors
from tests.support import RawClient, start_emqd

pytestmark = pytest.mark.slow


def persistence(r: redis.Redis) -> dict:
    return r.info("persistence")


def test_with_the_log_on(tmp_path: Path) -> None:
    started = int(time.time())
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            for i in range(50):
                r.hset("h", "f", i)
            info = persistence(r)
            assert info["aof_enabled"] == 1
            assert info["aof_rewrite_in_progress"] == 0
            assert info["aof_current_size"] == (tmp_path / "emqd.aof").stat().st_size > 0
            assert info["aof_base_size"] == 0
            raw = RawClient(server.port)
            assert raw.command("SAVE") == b"+OK\r\n"
            assert started <= r.lastsave().timestamp() <= time.time() + 1
            started_reply = raw.command("BGREWRITEAOF")
            assert started_reply == b"+Background append only file rewriting started\r\n"
            raw.close()
            deadline = time.monotonic() + 10
            while persistence(r)["aof_rewrite_in_progress"] and time.monotonic() < deadline:
                time.sleep(0.01)
            info = persistence(r)
            assert info["aof_rewrite_in_progress"] == 0
            assert info["aof_last_bgrewrite_status"] == "ok"
            assert info["aof_last_rewrite_time_sec"] >= 0
            assert info["aof_current_size"] == info["aof_base_size"] == len(
                b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$2\r\n49\r\n"
            )
    finally:
        server.stop()


def test_with_the_log_off_save_and_bgrewriteaof_say_so(raw: RawClient, r: redis.Redis) -> None:
    assert raw.command("SAVE") == b"-" + errors.AOF_DISABLED.message + b"\r\n"
    assert raw.command("BGREWRITEAOF") == b"-" + errors.AOF_DISABLED.message + b"\r\n"
    assert raw.command("LASTSAVE").startswith(b":")
    assert persistence(r)["aof_enabled"] == 0


def test_bgrewriteaof_and_save_are_refused_inside_multi(raw: RawClient) -> None:
    assert raw.command("MULTI") == b"+OK\r\n"
    assert raw.command("BGREWRITEAOF") == b"-ERR Command not allowed inside a transaction\r\n"
    assert raw.command("SAVE") == b"-ERR Command not allowed inside a transaction\r\n"
    assert raw.command("EXEC").startswith(b"-EXECABORT")
