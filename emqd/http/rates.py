"""Completed and failed jobs per minute over the last hour, for the overview's charts.

The series are samples of the stored counters (`completed_total`,
`failures_total`), taken at every minute boundary, not counts of events:

- a sample costs O(queues) once a minute, where counting events would cost
  the hot verbs' write path a little on every plan;
- it counts whatever moved the counters (verbs, housekeeping, a client's
  HINCRBY), exactly as /metrics shows them, so a chart and a Prometheus
  `rate()` agree.

A minute's figure is the counter at its end minus the counter at its start;
the current minute's end is the live counter. A minute whose samples are
missing (the server was not running) is None, drawn as no bar; a queue
that a sample does not list did not exist yet, and its counters were 0. A
counter that went down (FLUSHALL) counts as restarting from 0, as Prometheus
reads a reset.
"""

from __future__ import annotations

from collections import deque
from typing import Any

MINUTE_MS = 60_000
MINUTES = 60  # the charts' window

Sample = dict[bytes, tuple[int | None, int | None]]  # queue -> (completed_total, failures_total)


class RateHistory:
    """The counters at the start of each of the last MINUTES minutes."""

    def __init__(self) -> None:
        self.samples: deque[tuple[int, Sample]] = deque(maxlen=MINUTES + 1)

    def sample(self, now_ms: int, counters: Sample) -> None:
        """Keep `counters` as the start of the minute `now_ms` falls in (the first one wins)."""
        minute = now_ms // MINUTE_MS
        if self.samples and self.samples[-1][0] >= minute:
            return
        self.samples.append((minute, counters))

    def series(self, queue: bytes, now_ms: int,
               live: tuple[int | None, int | None]) -> tuple[list[int | None], list[int | None]]:
        """(completed per minute, failed per minute), oldest minute first, MINUTES each."""
        current = now_ms // MINUTE_MS
        # A queue missing from a sample did not exist yet: its counters were 0.
        starts = {minute: sample.get(queue, (0, 0)) for minute, sample in self.samples}
        completed: list[int | None] = []
        failed: list[int | None] = []
        for minute in range(current - MINUTES + 1, current + 1):
            begin = starts.get(minute)
            end = live if minute == current else starts.get(minute + 1)
            completed.append(_increase(begin, end, 0))
            failed.append(_increase(begin, end, 1))
        return completed, failed


def _increase(begin: tuple[Any, ...] | None, end: tuple[Any, ...] | None, which: int) -> int | None:
    if begin is None or end is None or begin[which] is None or end[which] is None:
        return None
    before: int = begin[which]
    after: int = end[which]
    return after - before if after >= before else after
