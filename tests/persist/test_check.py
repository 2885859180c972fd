"""A damaged log over the wire and `emqd --check-aof FILE [--fix]` as a subprocess: a start
refuses it naming where the damage starts, the check says what a cut drops, --fix cuts
after keeping a copy, and a torn tail's cut keeps the bytes it drops."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.persist.helpers import encode_records
from tests.support import ROOT, free_port, send_shutdown, start_emqd

pytestmark = pytest.mark.slow

ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def emqd_run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emqd", *argv], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def ten_adds(tmp_path: Path) -> bytes:
    """The issue's file: ten EMQ.ADDs of 9-byte payloads, logged by a real server."""
    server = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            for i in range(10):
                r.execute_command("EMQ.ADD", "q", f"payload-{i}")
        send_shutdown(server.port)
    finally:
        assert server.stop() == 0
    return (tmp_path / "emqd.aof").read_bytes()


def test_a_damaged_length_mid_file_stops_the_start_and_the_check_fixes_it_keeping_a_copy(
    tmp_path: Path,
) -> None:
    good = ten_adds(tmp_path)
    second = good.index(b"*1\r\n$5\r\nMULTI", 1)  # the record of the second ADD
    at = good.index(b"$9\r\npayload-1", second)
    damaged = good[:at] + b"$9000\r\npayload-1" + good[at + len(b"$9\r\npayload-1"):]
    assert len(damaged) < 9000  # the damaged length reaches past the end of the file
    path = tmp_path / "emqd.aof"
    path.write_bytes(damaged)

    start = emqd_run("--port", str(free_port()), "--http-port", "0", "--dir", str(tmp_path))
    assert start.returncode == 1
    damage = f"damaged at byte offset {at + 1}: a bulk length that reaches past the end"
    assert damage in start.stderr
    assert f"(in the record at byte offset {second})" in start.stderr
    assert "torn" not in start.stderr
    assert path.read_bytes() == damaged  # untouched

    check = emqd_run("--check-aof", str(path))
    assert check.returncode == 1, check.stderr
    assert f"damaged at byte offset {at + 1}" in check.stdout
    assert (f"a cut at byte offset {second} keeps {second} bytes and drops "
            f"{len(damaged) - second} bytes: the damaged record and 8 complete records after it"
            in check.stdout)
    assert f"--check-aof {path} --fix" in check.stdout
    assert path.read_bytes() == damaged  # a check writes nothing

    fix = emqd_run("--check-aof", str(path), "--fix")
    assert fix.returncode == 0, fix.stderr
    copies = list(tmp_path.glob("emqd.aof.orig-*"))
    assert [copy.read_bytes() for copy in copies] == [damaged]
    assert str(copies[0]) in fix.stdout
    assert path.read_bytes() == damaged[:second]
    again = emqd_run("--check-aof", str(path))
    assert (again.returncode, again.stdout.splitlines()[-1]) == (
        0, "clean: every byte is a complete record")

    server = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            assert r.zrange("emq:{q}:pending", 0, -1) == [b"1"]  # the first ADD's job
    finally:
        server.stop()


def test_a_huge_length_appended_to_a_good_file_is_named_where_it_starts(tmp_path: Path) -> None:
    good = encode_records([[(b"HSET", b"job:%d" % i, b"payload", b"p" * 80)] for i in range(5000)])
    path = tmp_path / "emqd.aof"
    path.write_bytes(good + b"*3\r\n$9223372036854775808\r\nHSET")
    start = emqd_run("--port", str(free_port()), "--http-port", "0", "--dir", str(tmp_path))
    assert start.returncode == 1
    assert f"damaged at byte offset {len(good) + 5}" in start.stderr
    assert f"(in the record at byte offset {len(good)})" in start.stderr
    check = emqd_run("--check-aof", str(path))
    assert check.returncode == 1
    assert (f"a cut at byte offset {len(good)} keeps {len(good)} bytes and drops 30 bytes: "
            "the damaged record and 0 complete records after it") in check.stdout


def test_the_check_reports_a_torn_tail_which_a_start_cuts_keeping_its_bytes(
    tmp_path: Path,
) -> None:
    whole = encode_records([[(b"HSET", b"kept", b"f", b"v")]] * 3)
    torn = encode_records([[(b"HSET", b"torn", b"f", b"v"), (b"DEL", b"kept")]])[:-5]
    path = tmp_path / "emqd.aof"
    path.write_bytes(whole + torn)
    check = emqd_run("--check-aof", str(path))
    assert check.returncode == 0
    assert f"a torn last record: {len(torn)} bytes at byte offset {len(whole)}" in check.stdout
    server = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            assert r.hgetall("kept") == {b"f": b"v"}
    finally:
        server.stop()
    assert path.read_bytes() == whole
    copies = list(tmp_path.glob("emqd.aof.torn-*"))
    assert [copy.read_bytes() for copy in copies] == [torn]
    assert str(copies[0]) in server.output()


def test_fix_refuses_while_an_emqd_holds_the_directory(tmp_path: Path) -> None:
    server = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            r.hset("h", "f", "v")
        path = tmp_path / "emqd.aof"
        with open(path, "ab") as file:  # a torn tail behind the server's back
            file.write(b"*3\r\n$4\r\nHSET")
        before = path.read_bytes()
        fix = emqd_run("--check-aof", str(path), "--fix")
        assert fix.returncode == 2
        assert "in use by another emqd" in fix.stderr
        assert path.read_bytes() == before
        assert not list(tmp_path.glob("emqd.aof.orig-*"))
    finally:
        server.stop()


def test_a_missing_file_cannot_be_checked(tmp_path: Path) -> None:
    check = emqd_run("--check-aof", str(tmp_path / "none.aof"))
    assert check.returncode == 2
    assert "cannot read it" in check.stderr
    assert emqd_run("--fix").returncode == 2  # argparse: --fix goes with --check-aof
