"""Section 6.1 across a real restart: a lease granted by the previous process is not counted."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from tests.support import start_emqd

pytestmark = pytest.mark.slow

FLAGS = ("--appendonly", "yes", "--appendfsync", "always", "--stalled-interval", "0")
LEASE_MS = 100


def job_row(r: redis.Redis, job_id: bytes) -> dict:
    return r.hgetall(b"emq:{q}:job:" + job_id)


def test_a_lease_that_crossed_a_restart_is_recovered_uncounted_then_the_next_is_counted(
    tmp_path: Path,
) -> None:
    server = start_emqd(*FLAGS, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            job_id = r.execute_command("EMQ.ADD", "q", "work")
            first_epoch = r.execute_command("EMQ.EPOCH")
            claimed = r.execute_command("EMQ.CLAIM", "q", LEASE_MS)
            assert claimed[:2] == [job_id, b"1"]
        server.kill(signal.SIGKILL)
    finally:
        server.stop()

    server = start_emqd(*FLAGS, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            assert r.execute_command("EMQ.EPOCH") != first_epoch
            row = job_row(r, job_id)
            assert row[b"state"] == b"active" and row[b"lease_epoch"] == first_epoch
            time.sleep(LEASE_MS / 1000 + 0.05)  # the lease has run out, under the new process
            assert r.execute_command("EMQ.STALLED.CHECK", "q") == [[job_id], []]
            row = job_row(r, job_id)
            assert row[b"state"] == b"pending"
            assert b"stalled" not in row  # exempt: not read, not written

            claimed = r.execute_command("EMQ.CLAIM", "q", LEASE_MS)
            assert claimed[:2] == [job_id, b"2"]
            time.sleep(LEASE_MS / 1000 + 0.05)  # runs out under the process that granted it
            assert r.execute_command("EMQ.STALLED.CHECK", "q") == [[job_id], []]
            row = job_row(r, job_id)
            assert row[b"state"] == b"pending" and row[b"stalled"] == b"1"  # counted
    finally:
        server.stop()
