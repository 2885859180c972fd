"""What CONFIG RESETSTAT sets back to 0, and what only grows (emqd/serve/server_stats.py)."""

from __future__ import annotations

from dataclasses import fields

from emqd.serve.server_stats import Counters, Stats, Tally


def test_reset_zeroes_info_s_counters_and_keeps_the_per_command_calls() -> None:
    stats = Stats()
    stats.total_commands, stats.total_connections = 10, 3
    stats.rejected_connections = stats.output_limit_disconnections = 2
    tally = stats.command_calls["ping"] = Tally()
    tally.n = 10
    stats.loop_lag.observe(500.0, 1000.0)
    stats.fsyncs.add(0.002)
    stats.reset()
    assert (stats.total_commands, stats.total_connections, stats.rejected_connections,
            stats.output_limit_disconnections) == (0, 0, 0, 0)
    assert stats.loop_lag.worst_ms(1000.0) == 0.0
    assert {name: t.n for name, t in stats.command_calls.items()} == {"ping": 10}  # only grow
    assert stats.loop_lag.cumulative[-1] == 1 and stats.fsyncs.cumulative[-1] == 1


def test_reset_zeroes_every_housekeeping_counter() -> None:
    # Each counter set to a value of its own: a field a reset forgot keeps it.
    counters = Counters()
    for i, field in enumerate(fields(counters), 1):
        setattr(counters, field.name, "refused" if isinstance(field.default, str) else i)
    assert all(value for value in counters.info().values())
    counters.reset()
    assert counters == Counters()
    assert set(counters.info()) == {f"housekeeping_{field.name}" for field in fields(counters)}
    assert counters.info()["housekeeping_repeated"] == 0
    assert counters.info()["housekeeping_released"] == 0
