"""emqd's clock, and the only reader of the system's clocks (protocol section 6.5).

`now_ms()` is wall-clock milliseconds since the Unix epoch, as TIME shows them
and as the log stores them, but it never jumps: it is the wall clock read once
at start, advanced by the monotonic clock, and steered toward the wall clock
at most SLEW_PPM (5 ms per second, ten times adjtime's rate), so over a long
run it tracks the system clock, while a step of the system clock (an NTP
step, a VM resume, an operator's `date -s`) moves it by 5 ms a second at
most. Leases and due times are scores in this clock, so a step of +1 h
expires no lease and a step of -1 h freezes neither recovery nor promotion;
the price is that, after such a step, the times emqd shows are apart from the
system clock's until it has caught up (1 s in 200 s, 1 h in 8.3 days). emqd
never steps its own clock: a forward step would expire every lease the step
overtakes and a backward one would freeze every deadline, which is what this
clock is for. A restart anchors the new process's clock to the system clock.

The monotonic clock (CLOCK_MONOTONIC) does not count a suspended machine: time
the server could not run is not time a worker's lease ran.

The wall clock is compared once per second of the monotonic clock, when
`now_ms` is next called after it; between looks the clock is linear, so a call
costs one monotonic read and a few integer operations. It is only read on the
event loop's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

log = logging.getLogger("emqd")

SLEW_PPM = 5000  # the most emqd's clock runs fast or slow to follow the wall clock (5 ms/s)
LOOK_NS = 1_000_000_000  # how often (monotonic) the wall clock is compared with emqd's
STEP_NS = 1_000_000_000  # a jump of the wall clock past this is logged
IN_STEP_NS = 1_000_000  # closer than this, the two clocks are "in step" again
_PPM = 1_000_000


class Clock:
    """Wall-clock time that runs at the monotonic clock's pace, slewed toward the wall clock.

    The state is one tuple (read whole, replaced whole): from monotonic time
    `base` on, the clock reads `value + elapsed + min(elapsed, slew) * rate / 1e6`
    (ns): `rate` (ppm, signed) is applied only for the `slew` ns that close
    the gap seen at the last look, so an idle server never overshoots.
    """

    def __init__(self, wall_ns: Callable[[], int] = time.time_ns,
                 mono_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._wall_ns = wall_ns
        self._mono_ns = mono_ns
        base = mono_ns()
        self._track = (base, wall_ns(), 0, 0, base + LOOK_NS)  # base, value, rate, slew, next look
        self._gap = 0  # wall minus this clock at the last look (ns)
        self.apart = False  # a logged step is still being caught up

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, never decreasing, never jumping."""
        mono = self._mono_ns()
        base, value, rate, slew, look = self._track
        if mono >= look:
            return self._look(mono) // 1_000_000
        elapsed = mono - base
        return (value + elapsed + (elapsed if elapsed < slew else slew) * rate // _PPM) // 1_000_000

    def skew_ms(self) -> int:
        """The system's wall clock minus this clock (ms): what is still to catch up."""
        return (self._wall_ns() - self._at(self._mono_ns())) // 1_000_000

    def _at(self, mono: int) -> int:
        base, value, rate, slew, _ = self._track
        elapsed = mono - base
        return value + elapsed + min(elapsed, slew) * rate // _PPM

    def _look(self, mono: int) -> int:
        """Compare with the wall clock and set the slew that closes the gap; the time now (ns)."""
        base, _, rate, slew, _ = self._track
        value = self._at(mono)
        gap = self._wall_ns() - value
        # What the gap would be had the wall clock not stepped: the last gap,
        # less what the slew closed since.
        expected = self._gap - min(mono - base, slew) * rate // _PPM
        self._gap = gap
        self._track = (mono, value, SLEW_PPM if gap > 0 else -SLEW_PPM,
                       abs(gap) * _PPM // SLEW_PPM, mono + LOOK_NS)
        if abs(gap - expected) > STEP_NS:
            self.apart = True
            log.warning(
                "the system clock jumped by %+.3f s; emqd's clock does not jump (leases and due "
                "times keep their length): it is %+.3f s from the system clock and follows it "
                "at %d ms/s (in step in about %.0f s; a restart re-anchors it)",
                (gap - expected) / 1e9, gap / 1e9, SLEW_PPM // 1000, abs(gap) / SLEW_PPM / 1000)
        elif self.apart and abs(gap) < IN_STEP_NS:
            self.apart = False
            log.info("emqd's clock is in step with the system clock again")
        return value


class _Held:
    """The time a batch of requests runs at (`hold`): -1 when none is held."""

    __slots__ = ("ms",)

    def __init__(self) -> None:
        self.ms = -1


_clock: Final = Clock()
_held: Final = _Held()


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as TIME shows them (emqd's clock, above)."""
    held = _held.ms
    return held if held >= 0 else _clock.now_ms()


def hold() -> int:
    """Read the clock once for a batch of requests (what one read of a client's socket
    brought): until `release`, `now_ms` answers this time. Redis caches the time per
    command; emqd per batch, which saves a clock read (~110 ns) per command of a
    pipeline. A batch runs in well under a millisecond per thousand commands, so
    the times it writes (leases, claimed_ms) are early by no more than that."""
    _held.ms = now = _clock.now_ms()
    return now


def release() -> None:
    """The batch is over: `now_ms` reads the clock again."""
    _held.ms = -1


def skew_ms() -> int:
    """The system's wall clock minus emqd's clock, in ms (INFO's `clock_skew_ms`)."""
    return _clock.skew_ms()


def monotonic_ms() -> float:
    """For intervals (the loop's lag), which must not jump with the wall clock."""
    return time.monotonic() * 1000.0
