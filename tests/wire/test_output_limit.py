"""Redis's client-output-buffer-limit rule, as a function of what is unsent and the time."""

from __future__ import annotations

from emqd.wire.output_limit import OutputLimit, check

PUBSUB = OutputLimit(hard=32 << 20, soft=8 << 20, soft_seconds=60)


def never() -> int:
    raise AssertionError("the clock was read while under every limit")


def test_under_both_limits_nothing_happens_and_the_clock_is_not_read() -> None:
    assert check(PUBSUB, 0, 0, never) == (False, 0)
    assert check(PUBSUB, (8 << 20) - 1, 0, never) == (False, 0)


def test_the_hard_limit_closes_at_once() -> None:
    assert check(PUBSUB, 32 << 20, 0, never)[0]
    assert check(OutputLimit(hard=100, soft=0, soft_seconds=0), 100, 0, never)[0]


def test_the_soft_limit_closes_only_after_its_seconds_continuously_over() -> None:
    over = 8 << 20
    assert check(PUBSUB, over, 0, lambda: 1_000) == (False, 1_000)  # the clock starts
    assert check(PUBSUB, over, 1_000, lambda: 61_000) == (False, 1_000)  # 60 s: not more
    assert check(PUBSUB, over, 1_000, lambda: 61_001) == (True, 1_000)
    assert check(PUBSUB, over - 1, 1_000, never) == (False, 0)  # back under: the clock stops
    assert check(PUBSUB, over, 0, lambda: 70_000) == (False, 70_000)  # and starts again


def test_zero_turns_a_limit_off() -> None:
    off = OutputLimit(hard=0, soft=0, soft_seconds=0)
    assert check(off, 1 << 40, 0, never) == (False, 0)
    soft_only = OutputLimit(hard=0, soft=10, soft_seconds=0)
    assert check(soft_only, 1 << 40, 0, lambda: 5) == (False, 5)
    assert check(soft_only, 1 << 40, 5, lambda: 6) == (True, 5)
