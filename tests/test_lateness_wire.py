"""The server's own lateness never costs a healthy worker its job (protocol section 6.4).

A worker holds one job with a 1,000 ms lease and sends EMQ.EXTEND every 300 ms
on its own connection, while another client holds the event loop for about
3 s with one heavy request. The worker's heartbeat waits in its socket
meanwhile; the lease's deadline passes during the hold. The sweep must read
the sockets before it judges, so the worker keeps its job.

Each heavy request is sized from a measured small one, so that it holds the
loop for about HOLD_S however fast the server gets: read commands are sent as
copies in one write (the server runs a read's requests back to back, as Redis
does), writes are made bigger. A third connection's PING measures the hold,
and the test insists that it was well over the lease, or it proved nothing.
The worker and the PING run in processes of their own (TIMED_CLIENT), so that
only the server's hold, never this process's, can delay them.

Big replies (HGETALL, KEYS, ZRANGE of 100,000 items) no longer hold the loop:
they are written a chunk at a time with other clients served in between
(docs/SERVER.md), so for those the test insists on the opposite, that no PING
waited as long as half a lease (on main before issue 15 they held it for the
whole HOLD_S), and the worker keeps its job all the same.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import hiredis
import pytest

from tests.support import RawClient, ServerProcess, encode_request, start_emqd

pytestmark = pytest.mark.slow

LEASE_MS = 1000
BEAT_S = 0.3
PING_EVERY_S = 0.005  # another client's PING: its worst wait is how long the loop was held
HOLD_S = 3.0  # how long the heavy request aims to hold the loop
MIN_HOLD_S = 1.3 * LEASE_MS / 1000  # below this the test would prove nothing
BOUND_S = 30.0  # every wait below fails past this
ATTEMPTS = 3  # a short hold is tried again, twice as big


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    proc = start_emqd()
    yield proc
    proc.stop()


def drain(sock: socket.socket, count: int) -> list:
    """Read `count` replies (a reader kept across chunks: big replies cost their size once)."""
    reader = hiredis.Reader()
    replies: list = []
    deadline = time.monotonic() + BOUND_S
    while len(replies) < count:
        assert time.monotonic() < deadline, "replies did not come within the bound"
        chunk = sock.recv(1 << 20)
        assert chunk, "connection closed"
        reader.feed(chunk)
        while (reply := reader.gets()) is not False:
            replies.append(reply)
    return replies


def send_and_drain(client: RawClient, data: bytes, count: int) -> tuple[list, float]:
    """Send `data` while its replies are read, as a pipelining client must.

    A client that wrote it all before reading would wait on its own full socket
    once the replies outgrow the socket buffers (a MULTI of 1.2 million ADDs
    answers 11 MB of QUEUED): the server stops reading a connection whose
    replies back up (docs/SERVER.md, flow control).
    """
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(client.send, data)
        replies = drain(client.sock, count)
        sent.result(timeout=BOUND_S)
    return replies, time.monotonic() - started


# The clients that time the server each run in a process of their own: building
# a heavy request holds this process's GIL in C for up to seconds (0.7 s for 3.2
# million HSET fields), which would hold back a thread's heartbeat, and cost the
# worker its job for a reason that is not the server's, or stretch a PING's wait.
# One request (encoded here, passed as hex) every `interval` s until stdin closes;
# "ready" after the first reply, then at the end each reply's line and the longest
# wait for one.
TIMED_CLIENT = textwrap.dedent("""
    import select, socket, sys, time
    port, interval, bound, request = sys.argv[1:]
    request = bytes.fromhex(request)
    sock = socket.create_connection(("127.0.0.1", int(port)), timeout=float(bound))
    replies, lines, worst = sock.makefile("rb"), [], 0.0
    deadline = time.monotonic() + float(bound)
    while time.monotonic() < deadline:
        started = time.monotonic()
        sock.sendall(request)
        lines.append(replies.readline())
        worst = max(worst, time.monotonic() - started)
        if len(lines) == 1:
            print("ready", flush=True)
        if select.select([sys.stdin], [], [], float(interval))[0]:
            break  # stdin closed: stop
    for line in lines:
        print(line.decode().rstrip("\\r\\n"))
    print(worst)
""")


class TimedClient:
    """A TIMED_CLIENT process: `stop()` gives its replies and its longest wait (s)."""

    def __init__(self, port: int, interval: float, *command: bytes | str | int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TIMED_CLIENT, str(port), str(interval), str(2 * BOUND_S),
             encode_request(*command).hex()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        try:
            assert self.proc.stdout is not None
            assert self.proc.stdout.readline() == "ready\n", "the timed client did not start"
        except BaseException:
            self.kill()
            raise

    def stop(self) -> tuple[list[str], float]:
        try:
            out, _ = self.proc.communicate(timeout=BOUND_S)  # closes stdin: the client ends
        finally:
            self.kill()
        assert self.proc.returncode == 0, out
        *replies, worst = out.splitlines()
        return replies, float(worst)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=BOUND_S)


# --- the heavy requests: setup, then (bytes, replies) for a size k ------------------
def pipelined_copies(command: bytes) -> Callable[[int], tuple[bytes, int]]:
    return lambda k: (command * k, k)


def fill_hash(client: RawClient) -> None:
    fields = [x for i in range(100_000) for x in (b"f%d" % i, b"v")]
    assert send_and_drain(client, encode_request("HSET", "big", *fields), 1)[0] == [100_000]


def fill_keys(client: RawClient) -> None:
    data = b"".join(encode_request("HSET", f"k{i}", "f", "v") for i in range(100_000))
    send_and_drain(client, data, 100_000)


def fill_zset(client: RawClient) -> None:
    members = [x for i in range(100_000) for x in (b"%d" % i, b"m%d" % i)]
    assert send_and_drain(client, encode_request("ZADD", "z", *members), 1)[0] == [100_000]


def multi_of_adds(k: int) -> tuple[bytes, int]:
    adds = encode_request("EMQ.ADD", "other", "payload") * (2000 * k)
    return encode_request("MULTI") + adds + encode_request("EXEC"), 2000 * k + 2


_hsets = iter(range(1_000_000))


def one_big_hset(k: int) -> tuple[bytes, int]:
    fields = [x for i in range(50_000 * k) for x in (b"f%d" % i, b"v")]
    return encode_request("HSET", f"h{next(_hsets)}", *fields), 1


HEAVY: dict[str, tuple[Callable[[RawClient], None] | None, Callable[[int], tuple[bytes, int]]]] = {
    "EXEC of a MULTI of EMQ.ADD": (None, multi_of_adds),
    "one HSET with very many fields": (None, one_big_hset),
    "HGETALL of a big hash": (fill_hash, pipelined_copies(encode_request("HGETALL", "big"))),
    "KEYS * on many keys": (fill_keys, pipelined_copies(encode_request("KEYS", "*"))),
    "ZRANGE 0 -1 of a big set": (fill_zset, pipelined_copies(encode_request("ZRANGE", "z", 0, -1))),
}
STREAMED = {"HGETALL of a big hash", "KEYS * on many keys", "ZRANGE 0 -1 of a big set"}
MAX_STREAMED_HOLD_S = LEASE_MS / 2000  # the longest a streamed reply may hold the loop


def hold_loop(port: int, make: Callable[[int], tuple[bytes, int]], attempts: int) -> float:
    """Send requests sized to hold the loop about HOLD_S; the longest hold a PING saw (s).

    A hold that came out short (a busy machine skews the measured unit) is
    tried again twice as big, at most ATTEMPTS times: each one is a hold the
    worker must survive.
    """
    heavy = RawClient(port, timeout=BOUND_S)
    held_s = 0.0
    try:
        _, unit_s = send_and_drain(heavy, *make(1))
        k = max(1, math.ceil(HOLD_S / unit_s))
        for _ in range(attempts):
            data, count = make(k)
            pinger = TimedClient(port, PING_EVERY_S, "PING")
            try:
                time.sleep(0.1)
                replies, _ = send_and_drain(heavy, data, count)
                time.sleep(0.1)
            finally:
                pongs, worst_s = pinger.stop()
            assert not isinstance(replies[-1], hiredis.ReplyError), replies[-1]
            assert pongs and set(pongs) == {"+PONG"}, set(pongs)
            held_s = max(held_s, worst_s)
            if held_s >= MIN_HOLD_S:
                break
            k *= 2
        return held_s
    finally:
        heavy.close()


def ask(client: RawClient, *args: bytes | str | int) -> object:
    """One command's reply, parsed."""
    client.send(encode_request(*args))
    return drain(client.sock, 1)[0]


@pytest.mark.parametrize("case", list(HEAVY))
def test_a_heartbeating_worker_keeps_its_job_across_a_heavy_command(
    server: ServerProcess, case: str
) -> None:
    setup, make = HEAVY[case]
    client = RawClient(server.port, timeout=BOUND_S)
    try:
        if setup is not None:
            setup(client)
        job = ask(client, "EMQ.ADD", "work", "job")
        claimed = ask(client, "EMQ.CLAIM", "work", LEASE_MS)
        assert isinstance(job, bytes) and isinstance(claimed, list) and claimed[0] == job
        token = claimed[1]
        worker = TimedClient(server.port, BEAT_S, "EMQ.EXTEND", "work", job, token, LEASE_MS)
        try:
            time.sleep(2 * BEAT_S)
            held_s = hold_loop(server.port, make, 1 if case in STREAMED else ATTEMPTS)
            time.sleep(3 * BEAT_S)  # past the deadline the hold overran: a wrong count shows
        finally:
            beats, _ = worker.stop()
        if case in STREAMED:
            assert held_s < MAX_STREAMED_HOLD_S, f"a streamed reply held the loop {held_s:.2f} s"
        else:
            assert held_s >= MIN_HOLD_S, f"the loop was held {held_s:.2f} s only: size the case up"
        assert len(beats) > 3, beats
        assert all(r.startswith(":") for r in beats), [r for r in beats if not r.startswith(":")]
        assert ask(client, "HGET", b"emq:{work}:job:" + job, "stalled") is None
        assert b"housekeeping_stall_recovered:0\r\n" in ask(client, "INFO", "stats")
        assert ask(client, "EMQ.COMPLETE", "work", job, token) == b"OK"
    finally:
        client.close()
