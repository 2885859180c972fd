"""emqd's clock driven by fake system clocks: it follows the monotonic clock, slews to the wall."""

from __future__ import annotations

import logging
import random
from typing import Any

from emqd import clock
from emqd.clock import LOOK_NS, SLEW_PPM, Clock

S = 1_000_000_000  # ns in a second
MS = 1_000_000
START_WALL = 1_700_000_000 * S + 123 * MS


class FakeClocks:
    """A wall clock and a monotonic clock the test moves by hand (ns)."""

    def __init__(self) -> None:
        self.wall = START_WALL
        self.mono = 5 * S

    def wall_ns(self) -> int:
        return self.wall

    def mono_ns(self) -> int:
        return self.mono

    def run(self, ns: int) -> None:
        """Both clocks advance together, as on a machine whose clock nobody touches."""
        self.wall += ns
        self.mono += ns


def make() -> tuple[FakeClocks, Clock]:
    fake = FakeClocks()
    return fake, Clock(fake.wall_ns, fake.mono_ns)


def run_reading(fake: FakeClocks, c: Clock, seconds: float, step_ns: int = S // 10) -> list[int]:
    """Advance `seconds`, reading the clock every `step_ns` as a busy server would."""
    readings = []
    for _ in range(int(seconds * S // step_ns)):
        fake.run(step_ns)
        readings.append(c.now_ms())
    return readings


def test_it_reads_the_wall_clock_while_nobody_steps_it() -> None:
    fake, c = make()
    assert c.now_ms() == START_WALL // MS
    run_reading(fake, c, 5)
    assert c.now_ms() == fake.wall // MS
    assert c.skew_ms() == 0


def test_a_forward_step_moves_it_only_by_the_slew() -> None:
    fake, c = make()
    run_reading(fake, c, 2)
    before = c.now_ms()
    fake.wall += 3600 * S  # NTP step or VM resume: +1 h
    run_reading(fake, c, 10)
    gained = c.now_ms() - before - 10_000
    assert 0 < gained <= 10 * SLEW_PPM // 1000  # at most 5 ms per second, and it does follow
    assert 3_600_000 - 60 <= c.skew_ms() <= 3_600_000


def test_a_backward_step_never_turns_it_back_nor_stops_it() -> None:
    fake, c = make()
    run_reading(fake, c, 2)
    before = c.now_ms()
    fake.wall -= 3600 * S
    readings = run_reading(fake, c, 10)
    assert readings == sorted(readings)
    lost = before + 10_000 - readings[-1]
    assert 0 < lost <= 10 * SLEW_PPM // 1000 + 1
    assert -3_600_000 <= c.skew_ms() <= -3_600_000 + 60


def test_it_catches_up_with_a_step_at_the_slew_rate_and_stays_in_step() -> None:
    fake, c = make()
    fake.wall += S  # +1 s: closed in 1 s / 5 ms/s = 200 s
    run_reading(fake, c, 100, step_ns=S)
    assert 490 <= c.skew_ms() <= 510
    run_reading(fake, c, 110, step_ns=S)
    assert c.skew_ms() == 0
    assert c.now_ms() == fake.wall // MS


def test_an_idle_clock_does_not_overshoot_the_wall_clock() -> None:
    """Read rarely (an idle server), the slew stops where the gap closed, not an hour later."""
    fake, c = make()
    fake.wall -= S // 2
    fake.run(LOOK_NS)
    c.now_ms()  # the look that sees the step
    fake.run(3600 * S)  # nobody asks for an hour
    assert c.now_ms() == fake.wall // MS
    assert c.skew_ms() == 0


def test_it_never_decreases_whatever_the_wall_clock_does() -> None:
    fake, c = make()
    rng = random.Random(15)
    last = c.now_ms()
    for _ in range(5000):
        if rng.random() < 0.05:
            fake.wall += rng.randint(-7200, 7200) * S
        fake.run(rng.randint(0, S // 2))
        now = c.now_ms()
        assert now >= last
        last = now


def test_a_step_is_logged_once_and_the_return_to_step_once(caplog: Any) -> None:
    fake, c = make()
    caplog.set_level(logging.INFO, logger="emqd")
    fake.wall += 2 * S
    run_reading(fake, c, 30, step_ns=S)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "jumped by +2.000 s" in warnings[0].getMessage()
    assert "follows it at 5 ms/s" in warnings[0].getMessage()
    run_reading(fake, c, 400, step_ns=S)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["emqd's clock is in step with the system clock again"]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_a_small_step_is_slewed_silently(caplog: Any) -> None:
    fake, c = make()
    caplog.set_level(logging.INFO, logger="emqd")
    fake.wall += S // 5  # an ordinary NTP correction
    run_reading(fake, c, 50, step_ns=S)
    assert caplog.records == []
    assert c.skew_ms() == 0


def test_the_module_clock_is_the_wall_clock_of_this_machine() -> None:
    import time

    assert abs(clock.now_ms() - time.time_ns() // MS) < 50
    assert abs(clock.skew_ms()) < 50


def test_a_held_time_is_what_every_read_answers_until_it_is_released() -> None:
    import time

    held = clock.hold()
    try:
        time.sleep(0.005)
        assert clock.now_ms() == held  # a batch's commands all run at its time
    finally:
        clock.release()
    assert clock.now_ms() >= held + 5  # released: the clock is read again
