"""A real emqd over the wire: restarts, kill -9 under load, torn tails, damage."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import hiredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from emqd.persist.load import load
from emqd.store.keyspace import Keyspace
from tests.persist.helpers import dump_file, encode_records
from tests.support import (
    ROOT,
    ServerProcess,
    encode_request,
    free_port,
    send_shutdown,
    start_emqd,
)
from tests.verbs.jobs import check_invariant

pytestmark = pytest.mark.slow

AOF_FLAGS = ("--appendonly", "yes", "--stalled-interval", "0", "--keep-completed", "1000000")


def emqd(tmp_path: Path, *flags: str) -> ServerProcess:
    return start_emqd(*AOF_FLAGS, *flags, dir=str(tmp_path))


def row(client: redis.Redis, queue: str, job_id: bytes | str) -> dict:
    jid = job_id.decode() if isinstance(job_id, bytes) else job_id
    return client.hgetall(f"emq:{{{queue}}}:job:{jid}")


HISTORY = "emq:{q}:minutes"  # the queue's metrics history (protocol section 22.5)


def keys_but_history(r: redis.Redis) -> int:
    """DBSIZE without the metrics history, which a shutdown writes: it closes the minute."""
    return int(r.dbsize()) - int(r.exists(HISTORY))


def test_a_restart_serves_what_was_written_under_a_new_epoch(tmp_path: Path) -> None:
    server = emqd(tmp_path, "--appendfsync", "everysec")
    try:
        with redis.Redis(port=server.port) as r:
            r.hset("h", mapping={"a": "1", "b": "2"})
            r.hset("gone", "x", "y")
            r.delete("gone")
            pipe = r.pipeline(transaction=True)
            pipe.hset("t", "f", "v")
            pipe.hset("t", "g", "\r\n*1\r\n$4\r\nEXEC\r\n")
            pipe.execute()
            ids = [r.execute_command("EMQ.ADD", "q", f"payload {i}") for i in range(5)]
            job = r.execute_command("EMQ.CLAIM", "q", 60000)
            r.execute_command("EMQ.COMPLETE", "q", job[0], job[1], "RESULT", "done")
            job = r.execute_command("EMQ.CLAIM", "q", 60000)
            # a retry due long after the test: promotion must not move it between
            # the two snapshots (the default backoff, 1 s, did on a loaded machine)
            r.execute_command("EMQ.FAIL", "q", job[0], job[1], "ERROR", "boom",
                              "BACKOFF", 600000)
            claimed = r.execute_command("EMQ.CLAIM", "q", 60000)
            before = {
                "rows": [row(r, "q", i) for i in ids],
                "stats": r.execute_command("EMQ.STATS", "q"),
                "h": r.hgetall("h"), "t": r.hgetall("t"), "dbsize": keys_but_history(r),
                "epoch": r.execute_command("EMQ.EPOCH"),
            }
            send_shutdown(server.port)
    finally:
        assert server.stop() == 0
    assert before["dbsize"] > 0
    server = emqd(tmp_path)
    try:
        with redis.Redis(port=server.port) as r:
            after = {
                "rows": [row(r, "q", i) for i in ids],
                "stats": r.execute_command("EMQ.STATS", "q"),
                "h": r.hgetall("h"), "t": r.hgetall("t"), "dbsize": keys_but_history(r),
                "epoch": r.execute_command("EMQ.EPOCH"),
            }
            assert r.exists(HISTORY)  # SHUTDOWN closed the minute in progress into the log
            old_epoch = before.pop("epoch")
            assert after.pop("epoch") != old_epoch
            assert after == before
            # The lease still names the process that granted it.
            assert row(r, "q", claimed[0])[b"lease_epoch"] == old_epoch
            assert r.exists("gone") == 0
    finally:
        server.stop()


def test_kill_9_under_load_loses_no_acknowledged_write(tmp_path: Path) -> None:
    server = emqd(tmp_path, "--appendfsync", "always")
    stop = threading.Event()
    acked: list[list[tuple]] = [[] for _ in range(4)]

    def client(n: int) -> None:
        queue = f"k{n}"
        r = redis.Redis(port=server.port, socket_timeout=5, retry=Retry(NoBackoff(), 0))
        try:
            for i in range(5000):
                if stop.is_set():
                    return
                job_id = r.execute_command("EMQ.ADD", queue, f"p{i}", "ID", f"{n}-{i}")
                acked[n].append(("added", queue, job_id))
                job = r.execute_command("EMQ.CLAIM", queue, 600000)
                if i % 3 == 0:
                    r.execute_command("EMQ.COMPLETE", queue, job[0], job[1])
                    acked[n].append(("completed", queue, job[0]))
                elif i % 3 == 1:
                    r.execute_command("EMQ.FAIL", queue, job[0], job[1], "ERROR", "x")
                    acked[n].append(("failed", queue, job[0]))
                r.hset(f"plain:{n}", f"f{i}", i)
                acked[n].append(("hset", f"plain:{n}", f"f{i}"))
        except (redis.ConnectionError, redis.TimeoutError):
            return
        finally:
            r.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while sum(map(len, acked)) < 400 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill(signal.SIGKILL)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    server.stop()
    assert sum(map(len, acked)) >= 400

    server = emqd(tmp_path)
    try:
        with redis.Redis(port=server.port) as r:
            for events in acked:
                for kind, key, name in events:
                    if kind == "hset":
                        assert r.hget(key, name) is not None, (kind, key, name)
                        continue
                    job = row(r, key, name)
                    assert job, (kind, key, name)
                    if kind == "completed":
                        assert job[b"state"] == b"completed"
                    elif kind == "failed":
                        assert int(job[b"failures"]) >= 1
    finally:
        server.stop()
    space = Keyspace()  # the file, as emqd loads it: every job in exactly one set
    load(str(tmp_path / "emqd.aof"), space)
    for n in range(4):
        check_invariant(space, b"emq:{k%d}:" % n)


def test_a_torn_last_record_is_dropped_and_cut_at_start(tmp_path: Path) -> None:
    whole = encode_records([[(b"HSET", b"kept", b"f", b"v")],
                            [(b"HSET", b"also", b"f", b"v"), (b"ZADD", b"z", 1, b"m")]])
    torn = encode_records([[(b"HSET", b"torn", b"f", b"v"), (b"DEL", b"kept")]])[:-5]
    path = tmp_path / "emqd.aof"
    path.write_bytes(whole + torn)
    server = emqd(tmp_path)
    try:
        with redis.Redis(port=server.port) as r:
            assert r.hgetall("kept") == {b"f": b"v"}
            assert r.exists("torn") == 0
            assert path.read_bytes() == whole
            r.hset("next", "f", "v")  # appended after the cut, where a reload finds it
    finally:
        server.stop()
    assert "torn last record" in server.output()
    assert dump_file(str(path))[b"next"] == ("hash", {b"f": b"v"})


def test_damage_before_the_end_stops_the_start_and_leaves_the_file(tmp_path: Path) -> None:
    head = encode_records([[(b"HSET", b"a", b"f", b"v")]] * 10)
    data = head + b"*2\r\n$3\r\nDEL\r\n$x\r\n" + encode_records([[(b"DEL", b"a")]])
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "emqd", "--port", str(free_port()), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=30, env=env,
    )
    assert done.returncode != 0
    assert f"byte offset {len(head) + 14}" in done.stderr
    assert path.read_bytes() == data


def test_a_damaged_crlf_in_the_middle_of_the_file_stops_the_start_at_its_offset(
    tmp_path: Path,
) -> None:
    """hiredis skips the two bytes after a bulk string; the start must not."""
    head = encode_records([[(b"HSET", b"job:%d" % i, b"payload", b"p" * 40)] for i in range(2000)])
    damaged = encode_records([[(b"HSET", b"a", b"f", b"value")]])[:-2] + b"\n\n"
    tail = encode_records([[(b"HSET", b"job:%d" % i, b"payload", b"p" * 40)] for i in range(2000)])
    data = head + damaged + tail
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "emqd", "--port", str(free_port()), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=30, env=env,
    )
    assert done.returncode == 1
    offset = len(head) + len(damaged) - 2
    assert f"damaged at byte offset {offset}: bulk string not followed by CRLF" in done.stderr
    assert path.read_bytes() == data


def test_a_second_emqd_on_the_same_directory_refuses_to_start(tmp_path: Path) -> None:
    server = emqd(tmp_path)
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-m", "emqd", "--port", str(free_port()), "--dir", str(tmp_path)],
            capture_output=True, text=True, timeout=30, env=env,
        )
        assert done.returncode == 1
        assert "in use by another emqd" in done.stderr
        with redis.Redis(port=server.port) as r:
            assert r.ping()
    finally:
        server.stop()
    emqd(tmp_path).stop()  # released when the first one stopped


@pytest.mark.parametrize("fsync", ["always", "everysec", "no"])
def test_a_clean_shutdown_acknowledges_only_what_it_logged(tmp_path: Path, fsync: str) -> None:
    # Big replies make the socket back up, so requests wait in the connection's queue
    # when SIGTERM comes; none may run (and be answered) once the log is closed.
    server = emqd(tmp_path, "--appendfsync", fsync)
    with redis.Redis(port=server.port) as r:
        r.hset("big", "f", b"x" * 70_000)
    acked: list[int] = []
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        request = encode_request("HGET", "big", "f") + encode_request("HINCRBY", "cnt", "n", 1)
        sock.sendall(request * 400)
        time.sleep(0.2)  # the server runs what the socket lets it, then waits to send
        server.proc.send_signal(signal.SIGTERM)
        reader = hiredis.Reader()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            reader.feed(chunk)
            while (reply := reader.gets()) is not False:
                if isinstance(reply, int):
                    acked.append(reply)
    finally:
        sock.close()
    assert server.proc.wait(timeout=10) == 0
    server.stop()
    assert acked, "no HINCRBY was answered: the test saw nothing"
    again = emqd(tmp_path, "--appendfsync", fsync)
    try:
        with redis.Redis(port=again.port) as r:
            assert int(r.hget("cnt", "n") or 0) >= max(acked)
    finally:
        again.stop()
