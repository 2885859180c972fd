"""Leases kept while a worker's event loop cannot run: a handler holding the GIL in C.

A handler that runs C code without releasing the GIL (a long regex, a sort of
millions of numbers, a C library's call) stops every Python thread of its
process, the worker's event loop and its heartbeats with it, so a lease shorter
than that call would run out and the job be recovered while it still runs. No
thread can help; another process can. Each Worker starts one keeper
(`Keeper.start`), a small process of its own (`main` below, started with
`python -c`: `-m` would import this module twice, once through the emqd.client
package), and tells it through a pipe, every sixth of the lease, that its loop
runs, with the CLIENT IDs of its connections:

- while beats come, the keeper does nothing;
- once none came for a third of the lease, the worker's loop is stuck: every
  third of the lease the keeper reads the queue's active jobs (at most
  ACTIVE_READ) and EXTENDs, with the row's own token, each one whose `holder`
  is one of the worker's connections (CLIENT SETNAME'd connections write their
  id there at CLAIM and EXTEND; the keeper's own connection is unnamed, so its
  EXTENDs leave it), unless the job has run past the worker's timeout; it logs
  one line when it takes over and one when the loop is back;
- when the pipe closes (the worker exited, or was SIGKILLed) the keeper exits at
  once: a dead worker's leases must run out, for the sweep to recover them;
- in cluster mode the worker's connections go to the queue's owner front and move
  with it (emqd/client/link.py); the worker tells the keeper where they are now, and
  the keeper connects there for its next round (a front that died is no help).

EXTEND is fenced, so a job the worker settled or lost meanwhile answers EMQSTALE
and nothing changes.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import hiredis

from emqd.client.request import encode

if TYPE_CHECKING:
    import ssl

ACTIVE_READ = 10_000  # active jobs of the queue read per round, at most
_MAIN = "from emqd.client.lease_keeper import main; main()"  # the keeper process's program


class Keeper:
    """The worker's side: the keeper process and the pipe of beats to it."""

    def __init__(self, proc: subprocess.Popen[bytes], endpoint: dict[str, Any]) -> None:
        self.proc = proc
        assert proc.stdin is not None  # started with stdin=PIPE
        self.stdin = proc.stdin  # the pipe of beats
        self.ids: list[int] = []
        self.endpoint = endpoint

    @classmethod
    def start(cls, endpoint: dict[str, Any], queue: bytes, lease_ms: int,
              timeout_ms: int | None) -> Keeper:
        """`endpoint`: host, port, path, username, password, db, and `tls` (redis-py's ssl_*
        arguments, or None for a plain connection). Sent through the pipe, never argv."""
        proc = subprocess.Popen([sys.executable, "-c", _MAIN],
                                stdin=subprocess.PIPE, start_new_session=True)
        settings = {"endpoint": endpoint, "queue": queue.decode("latin-1"),
                    "lease_ms": lease_ms, "timeout_ms": timeout_ms}
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(settings).encode() + b"\n")
        proc.stdin.flush()
        return cls(proc, endpoint)

    def beat(self, ids: list[int]) -> None:
        """The loop runs; `ids` are the worker's connections' CLIENT IDs now."""
        self._write(b"\n" if ids == self.ids else self._ids_line(ids))

    def tell(self, ids: list[int], endpoint: dict[str, Any] | None = None) -> None:
        """The worker's connections' CLIENT IDs, and where they are (`Keeper.start`'s
        `endpoint`), when either changed (before any handler runs on a new connection's
        claim: that handler may stop the loop at once)."""
        if endpoint is not None and endpoint != self.endpoint:
            self.endpoint = endpoint
            self._write(b"at " + json.dumps(endpoint).encode() + b"\n")
        if ids != self.ids:
            self._write(self._ids_line(ids))

    def _ids_line(self, ids: list[int]) -> bytes:
        self.ids = ids
        return ("ids " + " ".join(map(str, ids))).encode() + b"\n"

    def _write(self, line: bytes) -> None:
        try:
            self.stdin.write(line)
            self.stdin.flush()
        except OSError:
            pass  # the keeper is gone: the worker goes on without it

    def close(self) -> None:
        """The worker is done: closing the pipe ends the keeper."""
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# --- the keeper process ----------------------------------------------------------------
class _Client:
    """A blocking pipelining RESP client: enough for the keeper's few calls."""

    def __init__(self, endpoint: dict[str, Any]) -> None:
        if endpoint.get("path"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(endpoint["path"])
        else:
            sock = socket.create_connection((endpoint["host"], endpoint["port"]), timeout=10)
        if endpoint.get("tls") is not None:
            sock = _tls_context(endpoint["tls"]).wrap_socket(
                sock, server_hostname=endpoint["host"])
        self.sock = sock
        self.reader = hiredis.Reader()
        login: list[bytes] = []
        if endpoint.get("password") is not None:
            login.append(encode("AUTH", *filter(None, [endpoint.get("username"),
                                                         endpoint["password"]])))
        if endpoint.get("db"):
            login.append(encode("SELECT", endpoint["db"]))
        for reply in self.pipeline(login):
            if isinstance(reply, hiredis.ReplyError):
                raise OSError(f"login refused: {reply}")

    def pipeline(self, requests: list[bytes]) -> list[Any]:
        if not requests:
            return []
        self.sock.sendall(b"".join(requests))
        replies: list[Any] = []
        while len(replies) < len(requests):
            reply = self.reader.gets()
            if reply is False:
                data = self.sock.recv(65536)
                if not data:
                    raise OSError("connection closed")
                self.reader.feed(data)
                continue
            replies.append(reply)
        return replies

    def close(self) -> None:
        self.sock.close()


def _tls_context(arguments: dict[str, Any]) -> ssl.SSLContext:
    """redis-py's own TLS context for the queue's ssl_* arguments (as the worker's)."""
    from redis.asyncio.connection import SSLConnection

    context: ssl.SSLContext = SSLConnection(**arguments).ssl_context.get()
    return context


def keep_once(client: _Client, queue: bytes, ids: set[int], lease_ms: int,
              timeout_ms: int | None, now_ms: int) -> int:
    """One round: EXTEND every active job of `queue` that one of `ids` holds; how many."""
    prefix = b"emq:{" + queue + b"}:"
    (active,) = client.pipeline([encode(b"ZRANGE", prefix + b"active", 0, ACTIVE_READ - 1)])
    if isinstance(active, hiredis.ReplyError) or not active:
        return 0
    rows = client.pipeline([encode(b"HMGET", prefix + b"job:" + job_id, b"holder",
                                    b"attempts", b"claimed_ms", b"state")
                            for job_id in active])
    extends = []
    for job_id, row in zip(active, rows, strict=True):
        if isinstance(row, hiredis.ReplyError):
            continue
        holder, token, claimed_ms, state = row
        if state != b"active" or token is None or holder is None or not holder.isdigit():
            continue
        if int(holder) not in ids:
            continue
        if timeout_ms is not None and claimed_ms is not None and claimed_ms.isdigit() \
                and now_ms - int(claimed_ms) > timeout_ms:
            continue  # past the worker's timeout: let it run out
        extends.append(encode(b"EMQ.EXTEND", queue, job_id, token, lease_ms))
    replies = client.pipeline(extends)
    return sum(not isinstance(reply, hiredis.ReplyError) for reply in replies)


def main() -> None:
    """Read the settings line, then beats, from stdin until it closes."""
    pipe = _Pipe(sys.stdin.fileno())
    first = pipe.lines(wait=True)
    if not first:
        return
    settings = json.loads(first.pop(0))
    endpoint, lease_ms = settings["endpoint"], settings["lease_ms"]
    queue = settings["queue"].encode("latin-1")
    ids: set[int] = set()
    stalled_after = lease_ms / 3000
    quiet_since = time.monotonic()  # the last beat, or the last round of extends
    client: _Client | None = None
    keeping_since: float | None = None
    lines: list[bytes] = first
    while True:
        for line in lines:
            if line.startswith(b"ids"):
                ids = {int(word) for word in line.split()[1:]}
            elif line.startswith(b"at "):  # the worker's connections moved
                endpoint = json.loads(line[3:])
                if client is not None:
                    client.close()
                    client = None
        if lines:
            quiet_since = time.monotonic()
            if keeping_since is not None:
                _say(f"the worker's loop runs again after {quiet_since - keeping_since:.1f} s")
                keeping_since = None
        elif time.monotonic() - quiet_since >= stalled_after and ids:
            if keeping_since is None:
                keeping_since = quiet_since
                _say("the worker's loop has not run for a third of the lease (a handler "
                     "holding the GIL?); extending its leases meanwhile")
            try:
                client = client or _Client(endpoint)
                keep_once(client, queue, ids, lease_ms, settings["timeout_ms"],
                          int(time.time() * 1000))
            except (OSError, ValueError) as error:
                _say(f"cannot extend the leases now: {error}")
                if client is not None:
                    client.close()
                client = None
            quiet_since = time.monotonic()  # the next round a third of a lease on
        if not select.select([pipe.fd], [], [], lease_ms / 6000)[0]:
            lines = []
            continue
        read = pipe.lines(wait=False)
        if read is None:
            return  # the worker is gone (or done): its leases must run out now
        lines = read


class _Pipe:
    """The beats' pipe, read a line at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffered = b""

    def lines(self, wait: bool) -> list[bytes] | None:
        """The whole lines read (at least one when `wait`); None at end-of-file."""
        while True:
            data = os.read(self.fd, 65536)
            if not data:
                return None
            self.buffered += data
            *lines, self.buffered = self.buffered.split(b"\n")
            if lines or not wait:
                return lines


def _say(line: str) -> None:
    print(f"emqd lease keeper of pid {os.getppid()}: {line}", file=sys.stderr, flush=True)

