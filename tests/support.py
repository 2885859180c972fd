"""Test helpers: servers on free loopback ports, and raw RESP conversations.

Servers run as subprocesses started here and stopped by PID, so the tests
exercise the real command line. `RawClient` sends bytes and returns the exact
reply bytes, which the differential tests compare with a real redis-server.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from emqd.commit.plan import Plan
from emqd.commit.sink import Sink
from emqd.wire.resp import reply_end

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 10.0
_SCRATCH: list[str] = []  # the run's scratch directory, once made


def scratch() -> str:
    """The test run's own directory for the logs and data of the processes it starts
    (made at first use): conftest.py removes it when the run passes and names it when
    it fails, instead of leaving a few hundred files in /tmp every run."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix="emqd-tests-"))
    return _SCRATCH[0]


def scratch_made() -> str | None:
    return _SCRATCH[0] if _SCRATCH else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"server did not listen on {port} within {timeout}s")


class ServerProcess:
    """A server subprocess on a free port; `stop()` kills it by PID."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None,
                 cwd: str | None = None, preexec_fn: Callable[[], None] | None = None) -> None:
        self.port = port
        self.http_port = 0  # emqd's HTTP side, when start_emqd(http=True) asked for it
        self.argv = argv
        self.env, self.cwd, self.preexec_fn = env, cwd, preexec_fn
        self.log = tempfile.NamedTemporaryFile(prefix="server-", suffix=".log", delete=False,
                                               dir=scratch())
        self._spawn()

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
            start_new_session=True, preexec_fn=self.preexec_fn,
        )
        try:
            wait_for_port(self.port, self.proc)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.argv!r} failed to start:\n{self.output()}") from None

    def restart(self) -> None:
        """Start the same command again (after a kill), and wait for its port."""
        self.stop()
        self.log = open(self.log.name, "ab")  # noqa: SIM115 (closed by stop)
        self._spawn()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def send_signal(self, sig: int) -> None:
        """Send `sig` without waiting for an exit (SIGSTOP, SIGCONT)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=timeout)
        self.log.close()
        return self.proc.returncode


def start_emqd(*flags: str, dir: str | None = None, port: int | None = None,
               env: dict[str, str] | None = None, http: bool = False,
               ids_from_one: bool = True,
               open_files: int | tuple[int, int] | None = None) -> ServerProcess:
    """emqd as `python -m emqd` on a free port; `--appendonly no` unless flags say otherwise.

    The HTTP side is off (`--http-port 0`), so that servers started side by side
    never race for the default 6391; `http=True` gives it a free port of its
    own, as `server.http_port`, and waits for it too. Ids start at 1 (`--id-base
    0`), so tests can name the jobs they add, unless `ids_from_one` is False:
    then, without a log, emqd starts them after its start time (PROTOCOL.md 6.1).
    `open_files` starts it under that `ulimit -n` (soft and hard, or a (soft, hard) pair).
    """
    port = port or free_port()
    argv = [sys.executable, "-m", "emqd"]
    if "--port" not in flags:  # a TLS-only server says `--port 0` and is waited for on `port`
        argv += ["--port", str(port)]
    if "--appendonly" not in flags:
        argv += ["--appendonly", "no"]
    if ids_from_one and "--id-base" not in flags:
        argv += ["--id-base", "0"]
    http_port = free_port() if http else 0
    if "--http-port" not in flags:
        argv += ["--http-port", str(http_port)]
    if dir is not None:
        argv += ["--dir", dir]
    argv += list(flags)
    full_env = dict(os.environ)
    # The checkout under test, not whatever `pip install -e` last pointed at.
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    server = ServerProcess(argv, port, env=full_env, cwd=dir,
                           preexec_fn=None if open_files is None else ulimit_n(
                               *((open_files,) if isinstance(open_files, int) else open_files)))
    server.http_port = http_port
    if http_port:
        try:
            wait_for_port(http_port, server.proc)
        except Exception:
            server.stop()
            raise RuntimeError(f"{argv!r}: no HTTP side:\n{server.output()}") from None
    return server


def ulimit_n(soft: int, hard: int | None = None) -> Callable[[], None]:
    """A preexec_fn that starts a subprocess under `ulimit -n soft` (hard: the same)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, soft if hard is None else hard))

    return limit


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def start_redis(*flags: str, dir: str | None = None) -> ServerProcess:
    """Debian's redis-server as the protocol's section 7 reference."""
    port = free_port()
    argv = [redis_server_path() or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
            "--databases", "1", "--save", "", "--appendonly", "no", *flags]
    if dir is not None:
        argv += ["--dir", dir]
    return ServerProcess(argv, port, cwd=dir)


class RawClient:
    """A blocking socket that sends raw bytes and returns whole raw replies."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def command(self, *args: bytes | str | int) -> bytes:
        """Send one command as a multi-bulk request; the exact bytes of its reply."""
        self.send(encode_request(*args))
        return self.read_reply()

    def read_reply(self) -> bytes:
        """The bytes of exactly one complete reply (RESP2 or RESP3)."""
        while True:
            end = reply_length(self.buffer)
            if end is not None:
                reply, self.buffer = self.buffer[:end], self.buffer[end:]
                return reply
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"connection closed; buffered {self.buffer!r}")
            self.buffer += chunk

    def read_until_closed(self) -> bytes:
        data = self.buffer
        while True:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return data
            if not chunk:
                return data
            data += chunk


def send_shutdown(port: int) -> None:
    """SHUTDOWN on a raw socket; as in Redis, the answer is the connection closing.

    (redis-py's execute_command would reconnect to retry, and fail.)
    """
    client = RawClient(port)
    try:
        client.send(encode_request("SHUTDOWN"))
        assert client.read_until_closed() == b""
    finally:
        client.close()


def encode_request(*args: bytes | str | int) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)


def reply_length(buffer: bytes) -> int | None:
    """The length of the first complete reply in `buffer`, or None if incomplete (the
    scanner the cluster's fronts relay replies with)."""
    return reply_end(buffer, 0)


def map_elements(reply: bytes, pos: int = 0) -> dict[bytes, bytes]:
    """A map reply's entries (RESP3 `%`, or RESP2's flat array), each value's exact bytes,
    by its bulk-string key: to compare one part of a reply byte for byte."""
    head_end = reply.index(b"\r\n", pos)
    count = int(reply[pos + 1 : head_end])
    pairs = count if reply[pos : pos + 1] == b"%" else count // 2
    entries: dict[bytes, bytes] = {}
    nxt = head_end + 2
    for _ in range(pairs):
        key_end = reply_end(reply, nxt)
        value_end = reply_end(reply, key_end)  # type: ignore[arg-type]
        if key_end is None or value_end is None:
            raise ValueError("incomplete map reply")
        key = reply[reply.index(b"\r\n", nxt) + 2 : key_end - 2]
        entries[key] = reply[key_end:value_end]
        nxt = value_end
    return entries


def plain_value(value: object) -> tuple[str, dict]:
    """A stored value as plain data: ("hash", {field: value}) or ("zset", {member: score})."""
    from emqd.store import hash as hashes
    from emqd.store.zset import ZSet

    if isinstance(value, bytes) and not hashes.is_row(value):  # a listpack set, as its bytes
        value = ZSet(value)
    if isinstance(value, ZSet):
        return "zset", {member: score for score, member in value}
    return "hash", hashes.as_dict(value)  # type: ignore[arg-type]


class RecordingLog(Sink):
    """A sink (emqd/commit/sink.py) that keeps what is committed, in memory, durable at once.

    `records` holds each record's ops (one plan, or all of an EXEC); `ops` all of
    them in order; `appended` counts the records.
    """

    def __init__(self) -> None:
        super().__init__()
        self.records: list[list] = []

    @property
    def ops(self) -> list:
        return [op for record in self.records for op in record]

    def append(self, plan: Plan) -> None:
        self.records.append(list(plan.ops))
        self.appended += 1

    def append_batch(self, plans: list[Plan]) -> None:
        self.records.append([op for plan in plans for op in plan.ops])
        self.appended += 1
