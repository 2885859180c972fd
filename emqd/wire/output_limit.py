"""Redis's `client-output-buffer-limit`: when a client that does not read must be closed.

A class of clients has a hard limit (bytes unsent: close at once), a soft
limit and a number of seconds (over the soft limit for longer than that:
close). 0 turns a limit off. `check` is Redis 7.0's
checkClientOutputBufferLimits, for any class: the caller passes what is
unsent (for a connection, its transport's `get_write_buffer_size()`), and
keeps, per client, when it went over the soft limit (0 = it is not over).

Redis counts whole seconds (`server.unixtime`); emqd counts milliseconds, so
a client over the soft limit is closed at the first check more than
`soft_seconds` after it went over (Redis: up to a second later). Like Redis,
the limit is checked when something is written to the client, not by a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from emqd import clock


@dataclass(frozen=True, slots=True)
class OutputLimit:
    hard: int  # bytes; 0 = none
    soft: int  # bytes; 0 = none
    soft_seconds: int
    floor: int = field(init=False)  # the fewest unsent bytes that can matter

    def __post_init__(self) -> None:
        limits = [limit for limit in (self.hard, self.soft) if limit]
        object.__setattr__(self, "floor", min(limits) if limits else 1 << 62)


def check(
    limit: OutputLimit, unsent: int, over_soft_since_ms: int,
    now_ms: Callable[[], int] = clock.now_ms,
) -> tuple[bool, int]:
    """(close the client?, the new `over_soft_since_ms`) after `unsent` bytes were left.

    The clock is read only when the client is over a limit.
    """
    if unsent < limit.floor:
        return False, 0
    if limit.hard and unsent >= limit.hard:
        return True, over_soft_since_ms
    if not limit.soft or unsent < limit.soft:
        return False, 0
    now = now_ms()
    if not over_soft_since_ms:
        return False, now  # first seen over the soft limit: the clock starts
    return now - over_soft_since_ms > limit.soft_seconds * 1000, over_soft_since_ms
