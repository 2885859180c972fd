"""The servers under test: started on free loopback ports, stopped by PID.

Each server runs in its own session (`start_new_session`), so a Ctrl-C in the
terminal reaches only the benchmark, which then stops the servers itself.
`Server.stop()` is idempotent and used from `finally` blocks and the SIGTERM
handler alike.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import emqd

START_TIMEOUT_S = 15.0
EMQD_ROOT = Path(emqd.__file__).resolve().parent.parent  # the checkout (or site-packages) of emqd


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """One server subprocess: `name` is "emqd" or "redis"."""

    def __init__(self, name: str, argv: list[str], port: int, workdir: str,
                 env: dict[str, str] | None = None, cpus: set[int] | None = None) -> None:
        self.name = name
        self.port = port
        self.workdir = workdir
        self.log_path = Path(workdir) / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=workdir, start_new_session=True)
        try:
            if cpus:
                os.sched_setaffinity(self.proc.pid, cpus)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   + self.log_path.read_text(errors="replace")[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not answer PING on port {self.port}")

    def rss_bytes(self) -> int:
        """The server's resident set size, from /proc."""
        return self._status_bytes("VmRSS")

    def peak_rss_bytes(self) -> int:
        """The most the server's resident set has been since it started (VmHWM)."""
        return self._status_bytes("VmHWM")

    def _status_bytes(self, field: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} in /proc status")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server (all its threads) has used, from /proc."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start_emqd(workdir: str, cpus: set[int] | None, *flags: str) -> Server:
    """emqd as `python -m emqd`, the same emqd this benchmark was imported from.

    `--appendonly no` unless `flags` set it; no HTTP side (the dashboard is not
    what is measured, and two benchmarks must not race for its port); every
    other setting at its default.
    """
    port = free_port()
    argv = [sys.executable, "-m", "emqd", "--port", str(port), "--dir", workdir,
            "--loglevel", "warning", "--http-port", "0"]
    if "--appendonly" not in flags:
        argv += ["--appendonly", "no"]
    argv += list(flags)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EMQD_ROOT), env.get("PYTHONPATH")]))
    return Server("emqd", argv, port, workdir, env=env, cpus=cpus)


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def start_redis(workdir: str, cpus: set[int] | None, *flags: str) -> Server:
    port = free_port()
    argv = [redis_server_path() or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", workdir, "--loglevel", "warning",
            *flags]
    return Server("redis", argv, port, workdir, cpus=cpus)


def new_workdir() -> str:
    return tempfile.mkdtemp(prefix="emqd-bench-")
