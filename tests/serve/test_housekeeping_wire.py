"""The server's own clock work over the wire: no client sends PROMOTE or STALLED.CHECK.

Each test starts its own emqd (a short --stalled-interval where the sweep is
under test) and only watches: ADD, CLAIM, plain reads. Bounds are generous
functional bounds (the server aims at the due time itself), never timings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support import ServerProcess, start_emqd

BOUND_S = 3.0  # every wait below is bounded by this, and fails past it


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    flags = getattr(request, "param", ("--stalled-interval", "100"))
    proc = start_emqd(*flags)
    yield proc
    proc.stop()


@pytest.fixture
def r(server: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=server.port, protocol=2)
    yield client
    client.close()


def wait_for(condition: Callable[[], bool]) -> float:
    """Seconds until `condition` held; fails after BOUND_S."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > BOUND_S:
            raise AssertionError("not reached within the bound")
        time.sleep(0.005)
    return time.monotonic() - start


def row(r: redis.Redis, job: bytes) -> dict[bytes, bytes]:
    return r.hgetall(b"emq:{q}:job:" + job)


def stats(r: redis.Redis) -> dict[bytes, int]:
    flat = r.execute_command("EMQ.STATS", "q")
    return dict(zip(flat[::2], flat[1::2], strict=True))


def test_a_delayed_job_is_promoted_at_its_due_time(r: redis.Redis) -> None:
    job = r.execute_command("EMQ.ADD", "q", "later", "DELAY", "100")
    due_ms = int(row(r, job)[b"created_ms"]) + 100
    assert row(r, job)[b"state"] == b"scheduled"
    wait_for(lambda: row(r, job)[b"state"] == b"pending")
    assert time.time() * 1000 - due_ms < 500  # generous (same machine clock); it aims at due
    assert (stats(r)[b"pending"], stats(r)[b"scheduled"]) == (1, 0)
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[0] == job


def test_a_failed_job_comes_back_after_its_backoff_to_a_parked_claimer(
    r: redis.Redis, server: ServerProcess
) -> None:
    job = r.execute_command("EMQ.ADD", "q", "x")
    _, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "30000")
    assert r.execute_command("EMQ.FAIL", "q", job, token, "BACKOFF", "150") == [b"scheduled", 1]
    got: list = []
    with redis.Redis(port=server.port, protocol=2) as waiter:
        thread = threading.Thread(
            target=lambda: got.append(waiter.execute_command("EMQ.CLAIM", "q", "30000",
                                                             "BLOCK", "2500")))
        thread.start()
        thread.join(BOUND_S)
    assert not thread.is_alive()
    assert got == [[job, b"2", b"x", 1]]  # woken by the promotion, not by its timeout


def test_an_expired_lease_is_recovered_then_dead_at_the_second_stall(r: redis.Redis) -> None:
    job = r.execute_command("EMQ.ADD", "q", "x")
    assert r.execute_command("EMQ.CLAIM", "q", "50")[:2] == [job, b"1"]
    wait_for(lambda: row(r, job)[b"state"] == b"pending")
    assert row(r, job)[b"stalled"] == b"1" and b"failures" not in row(r, job)
    assert r.execute_command("EMQ.CLAIM", "q", "50")[:2] == [job, b"2"]
    wait_for(lambda: row(r, job)[b"state"] == b"dead")
    assert row(r, job)[b"stalled"] == b"2" and row(r, job)[b"last_error"] == b"stalled"
    assert (stats(r)[b"dead"], stats(r)[b"failed_total"], stats(r)[b"active"]) == (1, 1, 0)


def test_an_extended_lease_is_left_alone(r: redis.Redis) -> None:
    job = r.execute_command("EMQ.ADD", "q", "x")
    _, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "300")
    for _ in range(8):  # a heartbeat every 50 ms keeps the job past its first lease
        time.sleep(0.05)
        r.execute_command("EMQ.EXTEND", "q", job, token, "300")
    assert row(r, job)[b"state"] == b"active" and b"stalled" not in row(r, job)


@pytest.mark.parametrize("server", [("--stalled-interval", "0")], indirect=True)
def test_stalled_interval_zero_leaves_expired_leases_to_clients(r: redis.Redis) -> None:
    job = r.execute_command("EMQ.ADD", "q", "x")
    r.execute_command("EMQ.CLAIM", "q", "10")
    time.sleep(0.2)
    assert row(r, job)[b"state"] == b"active"
    assert r.execute_command("EMQ.STALLED.CHECK", "q") == [[job], []]


def test_a_corrupt_row_is_dead_lettered_and_the_other_leases_recovered(
    r: redis.Redis, server: ServerProcess
) -> None:
    """One row whose `stalled` is not a number once stopped the sweep of its whole queue
    for ever (housekeeping_refused climbing); now that row alone is quarantined."""
    jobs = [r.execute_command("EMQ.ADD", "q", f"x{i}") for i in range(3)]
    for _ in jobs:
        r.execute_command("EMQ.CLAIM", "q", "400")
    bad = jobs[1]
    r.hset(b"emq:{q}:job:" + bad, "stalled", "01")  # HINCRBY would refuse it
    wait_for(lambda: all(row(r, j)[b"state"] != b"active" for j in jobs))
    assert [row(r, j)[b"state"] for j in jobs] == [b"pending", b"dead", b"pending"]
    assert row(r, bad)[b"last_error"] == b"ERR hash value is not an integer (field 'stalled')"
    assert row(r, jobs[0])[b"stalled"] == b"1" == row(r, jobs[2])[b"stalled"]
    info = r.info("stats")
    assert (info["housekeeping_refused"], info["housekeeping_stall_quarantined"]) == (0, 1)
    assert info["housekeeping_stall_recovered"] == 2
    assert stats(r)[b"failed_total"] == 1  # counted, as a job CLAIM dead-letters
    time.sleep(0.3)  # more sweep intervals: logged once
    warnings = [line for line in server.output().splitlines() if "corrupt" in line]
    assert len(warnings) == 1
    assert "'q'" in warnings[0] and f"'{bad.decode()}'" in warnings[0]
    assert "ERR hash value is not an integer (field 'stalled')" in warnings[0]


def test_lowering_keep_completed_trims_the_excess(r: redis.Redis) -> None:
    for i in range(5):
        job = r.execute_command("EMQ.ADD", "q", f"job {i}")
        _, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "30000")
        r.execute_command("EMQ.COMPLETE", "q", job, token)
    assert stats(r)[b"completed"] == 5
    r.execute_command("EMQ.CONFIG", "q", "SET", "keep_completed", "2")
    wait_for(lambda: stats(r)[b"completed"] == 2)
    kept = [job for job in (b"1", b"2", b"3", b"4", b"5") if r.exists(b"emq:{q}:job:" + job)]
    assert kept == [b"4", b"5"]  # the newest are kept
    assert stats(r)[b"completed_total"] == 5  # the metric is not trimmed


def test_a_plain_zadd_to_scheduled_is_promoted_too(r: redis.Redis) -> None:
    r.hset("emq:{q}:job:j", mapping={"state": "scheduled", "payload": "by hand"})
    r.zadd("emq:{q}:scheduled", {"j": int(time.time() * 1000) + 50})
    wait_for(lambda: row(r, b"j")[b"state"] == b"pending")
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:3] == [b"j", b"1", b"by hand"]


def test_after_a_restart_the_server_catches_up_on_its_own(tmp_path: Path) -> None:
    first = start_emqd("--appendonly", "yes", "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=first.port, protocol=2) as r:
            due = r.execute_command("EMQ.ADD", "q", "due while down", "DELAY", "500")
            held = r.execute_command("EMQ.ADD", "q", "held while down")
            assert r.execute_command("EMQ.CLAIM", "q", "800")[0] == held
            for i in range(5):
                job = r.execute_command("EMQ.ADD", "q", f"done {i}")
                _, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "30000")
                r.execute_command("EMQ.COMPLETE", "q", job, token)
    finally:
        assert first.stop() == 0
    second = start_emqd("--appendonly", "yes", "--stalled-interval", "100",
                        "--keep-completed", "2", dir=str(tmp_path))
    try:
        with redis.Redis(port=second.port, protocol=2) as r:
            wait_for(lambda: row(r, due)[b"state"] == b"pending")  # promoted, no client asked
            wait_for(lambda: row(r, held)[b"state"] == b"pending")  # its lease ran out
            assert b"stalled" not in row(r, held)  # granted by the earlier process: exempt
            wait_for(lambda: stats(r)[b"completed"] == 2)  # the lower keep, applied at start
    finally:
        second.stop()
