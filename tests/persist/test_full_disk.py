"""A disk that refuses the log, with a real emqd: writes refused (MISCONF), reads and
connections served, nothing acknowledged that the file does not hold, and writes accepted
again by themselves once there is room (issue 12, finding 3)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support import ROOT, RawClient, free_port, start_emqd, wait_for_port

pytestmark = pytest.mark.slow

FLAGS = ("--appendonly", "yes", "--stalled-interval", "0")


def _answered(client: RawClient, *argv: str, within: float) -> bytes | None:
    """The reply of one command, or None when none came within `within` seconds (held)."""
    client.sock.settimeout(within)
    try:
        return client.command(*argv)
    except TimeoutError:
        return None
    finally:
        client.sock.settimeout(None)


def _fill_until_held(client: RawClient, value: str, bound: int) -> int:
    """HSETs until one is not answered: the count acknowledged."""
    for i in range(bound):
        reply = _answered(client, "HSET", f"key:{i}", "f", value, within=0.5)
        if reply is None:
            return i
        assert reply == b":1\r\n", reply
    raise AssertionError("the disk never refused")


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_refused_write_is_never_acknowledged_and_reads_go_on(tmp_path: Path,
                                                               policy: str) -> None:
    """The file cannot grow (RLIMIT_FSIZE: write(2) fails with EFBIG, as on a full disk)."""
    limit = 20_000

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "emqd", "--port", str(port), "--dir", str(tmp_path),
         *FLAGS, "--appendfsync", policy, "--http-port", "0"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, preexec_fn=small_files,
    )
    try:
        wait_for_port(port, proc)
        writer, other, queued = RawClient(port), RawClient(port), RawClient(port)
        try:
            assert queued.command("MULTI") == b"+OK\r\n"
            assert queued.command("HINCRBY", "c", "n", "5") == b"+QUEUED\r\n"
            acked = _fill_until_held(writer, "v" * 20, limit)
            assert acked > 100
            assert other.command("HSET", "x", "f", "v") == (
                b"-MISCONF Errors writing to the AOF file: File too large\r\n")
            assert other.command("EMQ.ADD", "q", "p").startswith(b"-MISCONF ")
            assert other.command("HGET", "key:0", "f") == b"$20\r\n" + b"v" * 20 + b"\r\n"
            assert b"aof_last_write_status:err" in other.command("INFO", "persistence")
            # an EXEC of a write queued before the disk refused: Redis's refusal, and
            # nothing applied (which other clients would see before the log holds it)
            assert queued.command("EXEC") == (b"-EXECABORT Transaction discarded because of: "
                                              b"MISCONF Errors writing to the AOF file: "
                                              b"File too large\r\n")
            assert other.command("HGET", "c", "n") == b"$-1\r\n"
            assert other.command("SAVE") == (
                b"-ERR the append only file could not be saved: File too large\r\n")
            assert proc.poll() is None  # still serving
        finally:
            writer.close()
            other.close()
            queued.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    server = start_emqd(*FLAGS, dir=str(tmp_path))  # the refused record's part: a torn tail
    try:
        with redis.Redis(port=server.port) as r:
            assert r.dbsize() == acked
            assert r.exists(f"key:{acked - 1}") == 1 and r.exists(f"key:{acked}") == 0
    finally:
        server.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of the test's own (root only: mount is how a full disk is made)."""
    if os.geteuid() != 0:
        pytest.skip("FULL-DISK TEST SKIPPED: mounting a small tmpfs needs root")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_full_disk_recovers_by_itself_when_room_returns(small_disk: Path, policy: str) -> None:
    data = small_disk / "data"
    data.mkdir()
    server = start_emqd(*FLAGS, "--appendfsync", policy, dir=str(data))
    filler = small_disk / "filler"
    try:
        free = shutil.disk_usage(small_disk).free
        filler.write_bytes(b"\0" * max(free - 64 * 1024, 0))  # leave the log 64 KiB
        writer, other = RawClient(server.port), RawClient(server.port)
        try:
            acked = _fill_until_held(writer, "v" * 200, 10_000)
            assert other.command("HSET", "x", "f", "v").startswith(b"-MISCONF ")
            assert b"aof_last_write_status:err" in other.command("INFO", "persistence")
            filler.unlink()  # room again: the held reply arrives, writes are accepted
            writer.sock.settimeout(5)
            assert writer.read_reply() == b":1\r\n"
            deadline = time.monotonic() + 5
            while b"aof_last_write_status:ok" not in other.command("INFO", "persistence"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert other.command("HSET", "x", "f", "v") == b":1\r\n"
        finally:
            writer.close()
            other.close()
        server.kill(signal.SIGKILL)
        again = start_emqd(*FLAGS, dir=str(data))
        try:
            with redis.Redis(port=again.port) as r:
                assert r.dbsize() == acked + 2  # every write acknowledged, the held one too
        finally:
            again.stop()
    finally:
        server.stop()
