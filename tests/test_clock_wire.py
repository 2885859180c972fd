"""A step of the system clock costs nothing (protocol section 6.5), under libfaketime.

The server runs with Debian's libfaketime preloaded: its wall clock is the
real one plus the offset written in a file (re-read at every call), its
monotonic clock is left alone, as an NTP step or a VM resume would leave it.
The test steps the wall clock by an hour, forward and backward, while jobs
are held, crashed and delayed.
"""

from __future__ import annotations

import glob
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support import ServerProcess, start_emqd

pytestmark = pytest.mark.slow

LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
HOUR_MS = 3_600_000
LEASE_MS = 1000
BEAT_S = 0.3
BOUND_S = 5.0


@pytest.fixture
def stepped(tmp_path: Path) -> Iterator[tuple[ServerProcess, Callable[[str], None]]]:
    """An emqd whose wall clock the test moves: step("+1h") / step("-1h")."""
    if not LIBFAKETIME:
        pytest.skip("LIBFAKETIME NOT INSTALLED: apt-get install -y faketime to run the clock tests")
    offset = tmp_path / "faketime.rc"
    offset.write_text("+0\n")
    server = start_emqd(env={
        "LD_PRELOAD": LIBFAKETIME[0],
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    })

    def step(text: str) -> None:
        offset.write_text(text + "\n")

    yield server, step
    server.stop()


def server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


def stats(r: redis.Redis) -> dict:
    return r.info("stats")


def test_a_step_forward_expires_no_healthy_lease(
    stepped: tuple[ServerProcess, Callable[[str], None]],
) -> None:
    server, step = stepped
    with redis.Redis(port=server.port) as r:
        jobs = [r.execute_command("EMQ.ADD", "work", f"job{i}") for i in range(3)]
        held = [r.execute_command("EMQ.CLAIM", "work", LEASE_MS) for _ in jobs]
        delayed = r.execute_command("EMQ.ADD", "later", "x", "DELAY", 10_000)

        def beat() -> None:
            for job_id, token, _, _ in held:
                r.execute_command("EMQ.EXTEND", "work", job_id, token, LEASE_MS)

        beat()
        before_ms, before_real = server_ms(r), time.monotonic()
        step("+1h")
        time.sleep(0.05)
        # Judged right at the step (a client's sweep), then by the server's own.
        assert r.execute_command("EMQ.STALLED.CHECK", "work") == [[], []]
        for _ in range(int(2.5 / BEAT_S)):
            time.sleep(BEAT_S)
            beat()
        elapsed_ms = (time.monotonic() - before_real) * 1000
        assert before_ms + elapsed_ms - 50 <= server_ms(r) <= before_ms + elapsed_ms + 50
        assert r.info("server")["clock_skew_ms"] >= HOUR_MS - 100
        assert stats(r)["housekeeping_stall_recovered"] == 0
        assert r.hget(b"emq:{later}:job:" + delayed, "state") == b"scheduled"
        for job_id, token, _, _ in held:
            assert r.hget(b"emq:{work}:job:" + job_id, "stalled") is None
            assert r.execute_command("EMQ.COMPLETE", "work", job_id, token) == b"OK"


def test_a_step_backward_freezes_neither_recovery_nor_promotion(
    stepped: tuple[ServerProcess, Callable[[str], None]],
) -> None:
    server, step = stepped
    with redis.Redis(port=server.port) as r:
        crashed = r.execute_command("EMQ.ADD", "work", "dies")
        assert r.execute_command("EMQ.CLAIM", "work", 500)[0] == crashed  # never heard of again
        delayed = r.execute_command("EMQ.ADD", "work", "later", "DELAY", 500)
        before_ms = server_ms(r)
        step("-1h")
        time.sleep(0.05)
        started = time.monotonic()
        states: tuple = ()
        while time.monotonic() - started < BOUND_S:
            states = tuple(r.hget(b"emq:{work}:job:" + job, "state") for job in (crashed, delayed))
            if states == (b"pending", b"pending"):
                break
            time.sleep(0.02)
        assert states == (b"pending", b"pending")
        assert time.monotonic() - started < 1.5  # due in 0.5 s: a few ms late, not an hour
        assert stats(r)["housekeeping_stall_recovered"] == 1
        assert stats(r)["housekeeping_promoted"] == 1
        assert server_ms(r) >= before_ms  # TIME does not go back
        assert r.info("server")["clock_skew_ms"] <= -HOUR_MS + 100
