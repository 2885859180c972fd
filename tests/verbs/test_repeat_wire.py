"""Repeatable jobs on a real server: the server adds them on its own timer, one a slot,
and never one slot twice, across a kill -9 and a restart (the log holds the slot's job and
the schedule's next slot in one record)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from tests.support import ServerProcess, start_emqd

pytestmark = pytest.mark.slow

FLAGS = ("--appendonly", "yes", "--appendfsync", "always", "--keep-completed", "0")


def consume(server: ServerProcess, seconds: float, seen: list[bytes]) -> None:
    """Claim and complete every job of `ticks` for `seconds` (completed rows are trimmed at
    once, so a slot added twice would be a new row, claimed twice)."""
    deadline = time.monotonic() + seconds
    with redis.Redis(port=server.port, socket_timeout=5) as r:
        while time.monotonic() < deadline:
            job = r.execute_command("EMQ.CLAIM", "ticks", 10_000, "BLOCK", 100)
            if job is not None:
                seen.append(job[0])
                r.execute_command("EMQ.COMPLETE", "ticks", job[0], job[1])


def slot(job_id: bytes) -> int:
    name, _, at = job_id.rpartition(b":")
    assert name == b"tick"
    return int(at)


def test_every_second_one_job_and_none_twice_across_kill_9(tmp_path: Path) -> None:
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    seen: list[bytes] = []
    try:
        with redis.Redis(port=server.port) as r:
            first = r.execute_command("EMQ.REPEAT", "ticks", "tick", "EVERY", 1000, "hello")
        consume(server, 2.6, seen)
        server.kill(signal.SIGKILL)
        server.proc.wait(5)
        time.sleep(1.2)  # a slot or two pass while it is down
        server = start_emqd(*FLAGS, dir=str(tmp_path), port=server.port)
        consume(server, 2.6, seen)
        with redis.Redis(port=server.port) as r:
            [schedule] = r.execute_command("EMQ.REPEATS", "ticks")
            assert schedule[b"next_ms"] > slot(seen[-1])
    finally:
        server.stop()
    slots = [slot(job_id) for job_id in seen]
    assert len(set(slots)) == len(slots), slots  # no slot twice
    assert slots == sorted(slots) and slots[0] == first
    gaps = [b - a for a, b in zip(slots, slots[1:], strict=False)]
    assert gaps.count(1000) >= len(gaps) - 1, gaps  # one a second ...
    assert all(gap % 1000 == 0 and gap <= 4000 for gap in gaps), gaps  # ... one catch-up job
    assert 5 <= len(slots) <= 8, slots
