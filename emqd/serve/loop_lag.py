"""The event loop's lag: how late a periodic timer fires, for INFO and /metrics.

One command that holds the loop (a huge MULTI, KEYS on millions of keys) delays
every other client and every timer. `LagProbe` measures that cheaply: a timer
every PERIOD_MS, whose lag is how much later than asked it ran (monotonic
time, so a step of the wall clock is not a lag). A stall shows as one sample
of about its length. `LoopLag` keeps what was seen: the latest sample, the
worst of the last minute (INFO's `# Stats`), and a cumulative histogram of
every sample (`Stats.loop_lag`, for /metrics).
"""

from __future__ import annotations

import asyncio

from emqd import clock
from emqd.serve.histogram import Histogram

PERIOD_MS = 100  # one sample per 100 ms: 10 timer callbacks a second
WINDOW_S = 60  # INFO's worst lag is over this many seconds
# Upper bounds of the histogram's buckets, in seconds (Prometheus `le`).
BOUNDS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLag(Histogram):
    """The lag samples seen: the latest, the worst per second of the last minute, and
    the histogram of all of them (in seconds)."""

    def __init__(self) -> None:
        super().__init__(BOUNDS_S)
        self.latest_ms = 0.0
        self.reset_worst()

    def observe(self, lag_ms: float, now_ms: float) -> None:
        self.latest_ms = lag_ms
        self.add(lag_ms / 1000.0)
        second = int(now_ms // 1000)
        slot = second % WINDOW_S
        seen_second, seen = self._worst[slot]
        if seen_second != second or lag_ms > seen:
            self._worst[slot] = (second, lag_ms)

    def reset_worst(self) -> None:
        """CONFIG RESETSTAT: INFO's worst lag starts again (the histogram is /metrics')."""
        self._worst = [(-1, 0.0)] * WINDOW_S  # per second of the monotonic clock: (second, ms)

    def worst_ms(self, now_ms: float) -> float:
        """The worst sample of the last WINDOW_S seconds."""
        oldest = int(now_ms // 1000) - WINDOW_S
        return max((lag for second, lag in self._worst if second > oldest), default=0.0)

    def info(self) -> dict[str, object]:
        return {
            "latest_loop_lag_ms": round(self.latest_ms),
            "worst_loop_lag_last_minute_ms": round(self.worst_ms(clock.monotonic_ms())),
        }


class LagProbe:
    """The timer that feeds a `LoopLag`: asks for PERIOD_MS, notes how much later it ran."""

    def __init__(self, record: LoopLag) -> None:
        self.record = record
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.expected_ms = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._arm(clock.monotonic_ms())

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop = None

    def _arm(self, now_ms: float) -> None:
        assert self.loop is not None
        self.expected_ms = now_ms + PERIOD_MS
        self.timer = self.loop.call_later(PERIOD_MS / 1000.0, self._tick)

    def _tick(self) -> None:
        now = clock.monotonic_ms()
        self.record.observe(max(now - self.expected_ms, 0.0), now)
        self._arm(now)
