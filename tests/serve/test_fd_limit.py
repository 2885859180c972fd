"""emqd/serve/fd_limit.py and emqd/serve/accept.py: under a low `ulimit -n` maxclients is
lowered to fit (or the limit raised), a client past it is answered
`-ERR max number of clients reached`, never reset, even when accept() itself runs out of
descriptors, and the log can still be compacted. Subprocesses started under the limit
(resource.setrlimit in preexec_fn)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from tests.support import ROOT, RawClient, start_emqd, ulimit_n

pytestmark = pytest.mark.slow

REFUSAL = b"-ERR max number of clients reached\r\n"


def refused(port: int) -> bytes:
    """Everything a new connection receives before the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        data = b""
        while chunk := sock.recv(4096):  # a reset would raise ConnectionResetError
            data += chunk
        return data


def soft_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open files line")


def test_a_low_ulimit_lowers_maxclients_and_every_client_past_it_is_told(tmp_path: Path) -> None:
    server = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path),
                        open_files=128)
    clients: list[RawClient] = []
    try:
        assert "maxclients lowered to 96" in server.output()
        admin = RawClient(server.port)
        clients.append(admin)
        assert admin.command("CONFIG", "GET", "maxclients") == (
            b"*2\r\n$10\r\nmaxclients\r\n$2\r\n96\r\n")
        for _ in range(95):
            client = RawClient(server.port)
            clients.append(client)
            assert client.command("PING") == b"+PONG\r\n"
        for _ in range(40):  # past the limit: told, then closed, never a reset
            assert refused(server.port) == REFUSAL
        admin.command("HSET", "h", "f", "v")
        assert admin.command("BGREWRITEAOF") == (
            b"+Background append only file rewriting started\r\n")
        deadline = time.monotonic() + 10
        while b"aof_rewrite_in_progress:0" not in admin.command("INFO", "persistence"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert b"aof_last_bgrewrite_status:ok" in admin.command("INFO", "persistence")
        assert b"rejected_connections:40" in admin.command("INFO", "stats")
        assert admin.command("CONFIG", "SET", "maxclients", "10000") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The "
            b"operating system is not able to handle the specified number of clients, try "
            b"with 96\r\n")
        for client in clients[-10:]:
            client.close()
        del clients[-10:]
        time.sleep(0.2)
        again = RawClient(server.port)
        clients.append(again)
        assert again.command("PING") == b"+PONG\r\n"
    finally:
        for client in clients:
            client.close()
        server.stop()


def test_the_soft_limit_is_raised_when_the_hard_one_allows(tmp_path: Path) -> None:
    server = start_emqd("--maxclients", "1000", dir=str(tmp_path), open_files=(64, 4096))
    try:
        assert soft_limit(server.pid) == 1032  # maxclients and Redis's reserve of 32
        with redis.Redis(port=server.port) as r:
            assert r.config_get("maxclients") == {"maxclients": "1000"}
            assert r.config_set("maxclients", 3000)
            assert soft_limit(server.pid) == 3032
            with pytest.raises(redis.ResponseError, match="try with 4064$"):
                r.config_set("maxclients", 5000)
            assert r.config_get("maxclients") == {"maxclients": "3000"}
    finally:
        server.stop()


def test_a_limit_too_low_for_one_client_stops_the_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "emqd", "--appendonly", "no", "--http-port", "0"],
        capture_output=True, text=True, timeout=30, preexec_fn=ulimit_n(30),
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1
    assert "the open files limit (ulimit -n) of 30 is not enough for emqd to start" in done.stderr


ACCEPTOR = textwrap.dedent("""
    import asyncio, os, socket, sys
    import uvloop
    from emqd.serve.accept import Acceptor
    from emqd.config import Config
    from emqd.serve.sockets import BoundSocket
    from emqd.core import Core

    async def main() -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        core = Core(Config(maxclients=10000))
        Acceptor(loop, BoundSocket(sock, "--port", None), asyncio.Protocol, core)
        hog = []
        while True:  # every descriptor taken: accept() fails with EMFILE
            try:
                hog.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        print(sock.getsockname()[1], flush=True)
        while core.stats.rejected_connections < 3:
            await asyncio.sleep(0.01)
        print(core.stats.rejected_connections, flush=True)

    uvloop.run(main())
""")


def test_when_accept_runs_out_of_descriptors_the_client_is_still_told() -> None:
    with subprocess.Popen([sys.executable, "-c", ACCEPTOR], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, preexec_fn=ulimit_n(64),
                          env=dict(os.environ, PYTHONPATH=str(ROOT))) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            port = int(proc.stdout.readline())
            for _ in range(3):
                assert refused(port) == REFUSAL
            assert proc.stdout.readline() == "3\n"
            assert proc.wait(timeout=10) == 0
            assert "no file descriptor left to accept a client" in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
