"""The loop-lag record (pure), its probe on a real loop, and what INFO shows of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from emqd.serve.loop_lag import BOUNDS_S, PERIOD_MS, WINDOW_S, LagProbe, LoopLag
from tests.support import RawClient, ServerProcess, encode_request, start_emqd


def test_samples_fill_a_cumulative_histogram_with_a_sum() -> None:
    record = LoopLag()
    for lag_ms in (0.0, 0.7, 3.0, 30.0, 700.0, 20_000.0):
        record.observe(lag_ms, now_ms=1_000_000.0)
    counts = dict(zip(BOUNDS_S, record.cumulative, strict=False))
    assert counts[0.001] == 2  # 0 and 0.7 ms
    assert counts[0.005] == 3
    assert counts[0.05] == 4
    assert counts[1.0] == 5
    assert counts[10.0] == 5  # 20 s is only in +Inf
    assert record.cumulative[-1] == 6
    assert record.cumulative == sorted(record.cumulative)
    assert record.sum_s == pytest.approx(20.7337)
    assert record.latest_ms == 20_000.0


def test_the_worst_lag_is_that_of_the_last_minute() -> None:
    record = LoopLag()
    record.observe(900.0, now_ms=10_000.0)
    record.observe(5.0, now_ms=30_000.0)
    assert record.worst_ms(now_ms=30_000.0) == 900.0
    assert record.worst_ms(now_ms=10_000.0 + (WINDOW_S - 1) * 1000) == 900.0
    assert record.worst_ms(now_ms=10_000.0 + WINDOW_S * 1000) == 5.0  # the 900 ms aged out
    record.observe(1.0, now_ms=10_000.0 + WINDOW_S * 1000)  # reuses the old second's slot
    assert record.worst_ms(now_ms=10_000.0 + WINDOW_S * 1000) == 5.0
    assert record.worst_ms(now_ms=10_000.0 + 3 * WINDOW_S * 1000) == 0.0


async def test_the_probe_sees_a_callback_that_holds_the_loop() -> None:
    record = LoopLag()
    probe = LagProbe(record)
    probe.start(asyncio.get_running_loop())
    try:
        await asyncio.sleep(PERIOD_MS / 1000 * 2.5)
        quiet = record.cumulative[-1]
        assert quiet >= 1 and record.latest_ms < 50
        time.sleep(0.3)  # one long command
        await asyncio.sleep(PERIOD_MS / 1000 * 1.5)
    finally:
        probe.stop()
    # The tick was due at most PERIOD_MS after the hold began, so it ran at least
    # 300 - PERIOD_MS late (less a millisecond of timer rounding).
    assert 300 - PERIOD_MS - 1 <= record.worst_ms(time.monotonic() * 1000) < 1000
    assert record.sum_s >= 0.25


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    proc = start_emqd()
    yield proc
    proc.stop()


@pytest.mark.slow
def test_info_shows_the_latest_and_the_worst_lag_of_the_last_minute(server: ServerProcess) -> None:
    with redis.Redis(port=server.port) as r:
        stats = r.info("stats")
        assert isinstance(stats["latest_loop_lag_ms"], int)
        assert stats["worst_loop_lag_last_minute_ms"] < 100
        assert isinstance(r.info("server")["clock_skew_ms"], int)
        with r.pipeline(transaction=False) as pipe:
            for i in range(20_000):
                pipe.hset(b"k%d" % i, b"f", b"v")
            pipe.execute()
    raw = RawClient(server.port, timeout=30)
    try:
        held_ms = 0.0
        for doubling in range(12):  # a read of 2**n scans, until it holds the loop 0.4 s
            count = 2**doubling
            started = time.monotonic()
            raw.send(encode_request("KEYS", "nomatch*") * count)  # one read, run back to back
            for _ in range(count):
                assert raw.read_reply() == b"*0\r\n"
            held_ms = (time.monotonic() - started) * 1000
            if held_ms >= 400:
                break
        time.sleep(PERIOD_MS / 1000 * 2)
    finally:
        raw.close()
    with redis.Redis(port=server.port) as r:
        stats = r.info("stats")
    assert held_ms >= 400
    assert stats["worst_loop_lag_last_minute_ms"] >= held_ms - 2 * PERIOD_MS
    assert stats["latest_loop_lag_ms"] < 100
