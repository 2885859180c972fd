"""A cumulative histogram of durations, as Prometheus reads one, that any thread may feed.

The event loop's lag (emqd/serve/loop_lag.py) and the log's fsyncs (persist/aof.py,
fed from the loop and from the everysec thread) are both kept so, in the
process, and /metrics turns them into `_bucket`, `_sum` and `_count` samples at
scrape time (emqd/http/metrics.py). Nothing here knows Prometheus.
"""

from __future__ import annotations

import threading


class Histogram:
    """`cumulative[i]` counts the samples <= `bounds_s[i]`; its last entry (the `+Inf`
    bucket) counts them all. `sum_s` is their sum in seconds."""

    def __init__(self, bounds_s: tuple[float, ...]) -> None:
        self.bounds_s = bounds_s
        self.cumulative = [0] * (len(bounds_s) + 1)
        self.sum_s = 0.0
        # Two threads may add at once: the loop's fsync and the everysec thread's.
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.sum_s += seconds
            cumulative = self.cumulative
            for i, bound in enumerate(self.bounds_s):
                if seconds <= bound:
                    cumulative[i] += 1
            cumulative[-1] += 1
