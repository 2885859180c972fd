"""A queue's rate limit on a real server, under greedy consumers: the window holds, and
claimers held by it are woken by a timer when it frees (no client polls: they BLOCK)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.support import start_emqd

pytestmark = pytest.mark.slow

RATE, PER_MS, CONSUMERS, SECONDS = 10, 1000, 8, 3.0


def test_ten_a_second_holds_under_eight_greedy_consumers() -> None:
    server = start_emqd("--keep-completed", "100000")
    try:
        with redis.Redis(port=server.port) as r:
            pipe = r.pipeline(transaction=False)
            for i in range(300):
                pipe.execute_command("EMQ.ADD", "api", f"call{i}")
            pipe.execute()
            r.execute_command("EMQ.RATE", "api", RATE, PER_MS)
        claimed: list[bytes] = []
        lock = threading.Lock()
        started = time.monotonic()

        def consumer() -> None:
            with redis.Redis(port=server.port, socket_timeout=10) as c:
                while time.monotonic() - started < SECONDS:
                    # BLOCK longer than a window: the window's timer wakes it
                    job = c.execute_command("EMQ.CLAIM", "api", 60_000, "BLOCK", 5000)
                    if job is None:
                        continue
                    c.execute_command("EMQ.COMPLETE", "api", job[0], job[1])
                    with lock:
                        claimed.append(job[0])

        threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SECONDS + 5)
        elapsed = time.monotonic() - started
        with redis.Redis(port=server.port) as r:
            times = sorted(int(r.hget(f"emq:{{api}}:job:{job_id.decode()}", "claimed_ms"))
                           for job_id in claimed)
    finally:
        server.stop()
    assert len(set(claimed)) == len(claimed)
    # At most RATE in any window of PER_MS, by the server's own clock: exactly.
    for i in range(len(times) - RATE):
        assert times[i + RATE] - times[i] >= PER_MS, (i, times[i:i + RATE + 1])
    # And the window was used: within one window's slack of RATE a second.
    assert RATE * (elapsed - 1) <= len(times) <= RATE * (elapsed + 1), (len(times), elapsed)
