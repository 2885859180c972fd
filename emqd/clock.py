"""The only reader of the wall clock: planners get `now_ms` as an argument."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as Redis's TIME would give them."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> float:
    """For timeouts and intervals, which must not jump with the wall clock."""
    return time.monotonic() * 1000.0
