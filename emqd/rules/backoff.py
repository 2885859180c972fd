"""Backoff rules (protocol section 6.2): how long a failed job waits before its retry.

A rule is `N` or `fixed:N` (N ms every time) or `exp:BASE[:MAX]`
(BASE * 2^(f-1) ms after failure f, at most MAX, or at most one hour without
MAX). No jitter: a plan must be a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from emqd.compat.numbers import parse_int

HOUR_MS: Final = 3_600_000


@dataclass(frozen=True, slots=True)
class Backoff:
    base: int
    exponential: bool = False
    cap: int = HOUR_MS

    def delay(self, failures: int) -> int:
        """The wait in ms after failure number `failures` (1 for the first)."""
        if not self.exponential:
            return self.base
        if failures > 64:
            return self.cap
        return min(self.base * (1 << max(failures - 1, 0)), self.cap)


def parse_backoff(raw: bytes) -> Backoff | None:
    """The rule `raw` spells, or None when it is not a rule."""
    parts = raw.split(b":")
    read = [parse_int(part) for part in parts[1:]] if len(parts) > 1 else []
    numbers = [n for n in read if n is not None and n >= 0]
    if len(numbers) != len(read):
        return None
    if len(parts) == 1:
        base = parse_int(raw)
        return Backoff(base) if base is not None and base >= 0 else None
    kind = parts[0]
    if kind == b"fixed" and len(numbers) == 1:
        return Backoff(numbers[0])
    if kind == b"exp" and len(numbers) in (1, 2):
        cap = numbers[1] if len(numbers) == 2 else HOUR_MS
        return Backoff(numbers[0], True, cap)
    return None
