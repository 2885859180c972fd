"""emqd/http/rates.py: per-minute figures from samples of the stored counters."""

from __future__ import annotations

from emqd.http.rates import MINUTE_MS, MINUTES, RateHistory

T0 = 1_000 * MINUTE_MS  # a minute boundary


def test_each_minute_is_the_difference_of_its_samples_and_now_is_live() -> None:
    history = RateHistory()
    history.sample(T0 + 50, {b"q": (10, 1)})
    history.sample(T0 + MINUTE_MS + 70, {b"q": (16, 1)})
    completed, failed = history.series(b"q", T0 + 2 * MINUTE_MS - 1, live=(19, 4))
    assert len(completed) == len(failed) == MINUTES
    assert completed[-2:] == [6, 3] and failed[-2:] == [0, 3]
    assert completed[:-2] == [None] * (MINUTES - 2)  # before the server ran


def test_a_queue_a_sample_does_not_list_had_zero_then() -> None:
    history = RateHistory()
    history.sample(T0, {})
    completed, _ = history.series(b"new", T0 + 10, live=(5, 0))
    assert completed[-1] == 5


def test_a_counter_that_went_down_restarted_from_zero() -> None:
    history = RateHistory()
    history.sample(T0, {b"q": (100, 0)})
    completed, _ = history.series(b"q", T0 + 10, live=(7, 0))
    assert completed[-1] == 7


def test_an_unreadable_counter_is_no_figure() -> None:
    history = RateHistory()
    history.sample(T0, {b"q": (None, 2)})
    completed, failed = history.series(b"q", T0 + 10, live=(3, 2))
    assert (completed[-1], failed[-1]) == (None, 0)


def test_one_sample_a_minute_and_an_hour_of_them() -> None:
    history = RateHistory()
    history.sample(T0, {b"q": (1, 0)})
    history.sample(T0 + 1000, {b"q": (50, 0)})  # the same minute: the first one stays
    assert history.samples[-1][1][b"q"] == (1, 0)
    for minute in range(1, 200):
        history.sample(T0 + minute * MINUTE_MS, {b"q": (minute, 0)})
    assert len(history.samples) == MINUTES + 1
    completed, _ = history.series(b"q", T0 + 199 * MINUTE_MS + 5, live=(199, 0))
    assert completed == [1] * (MINUTES - 1) + [0]
