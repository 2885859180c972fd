"""ServerState's run-time changes: CONFIG SET's `reconfigure` and CONFIG RESETSTAT's reset."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from emqd.config import Config
from emqd.plan import Plan
from emqd.server_state import ServerState, Tally
from emqd.store import hash as hashes


@pytest.fixture
def emqd_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("emqd")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_reconfigure_replaces_the_config_and_tells_the_store_and_the_logger(
        emqd_logger: logging.Logger) -> None:
    state = ServerState(Config(hash_max_listpack_entries=2))
    old = state.config
    assert state.keyspace.limits.hash_entries == 2  # the flags reach the store at start
    state.commit(Plan([(b"HSET", b"h", b"a", b"1", b"b", b"2")]))
    state.reconfigure({"hash_max_listpack_entries": 1, "zset_max_listpack_value": 3,
                       "loglevel": "warning", "max_attempts": 9})
    assert old.max_attempts == 3 and old.hash_max_listpack_entries == 2  # never changed
    assert state.config == Config(hash_max_listpack_entries=1, zset_max_listpack_value=3,
                                  loglevel="warning", max_attempts=9)
    limits = state.keyspace.limits
    assert (limits.hash_entries, limits.hash_value, limits.zset_entries, limits.zset_value) == \
        (1, 64, 128, 3)
    assert emqd_logger.level == logging.WARNING
    row = state.keyspace.hash(b"h")
    assert row is not None and hashes.is_listpack(row)  # what exists converts at its next write
    state.commit(Plan([(b"HSET", b"h", b"a", b"2")]))
    row = state.keyspace.hash(b"h")
    assert row is not None and not hashes.is_listpack(row)


def test_reset_stats_zeroes_info_s_counters_and_keeps_the_per_command_calls() -> None:
    state = ServerState(Config())
    state.total_commands, state.total_connections = 10, 3
    state.rejected_connections = state.output_limit_disconnections = 2
    tally = state.command_calls["ping"] = Tally()
    tally.n = 10
    state.loop_lag.observe(500.0, 1000.0)
    state.reset_stats()
    assert (state.total_commands, state.total_connections, state.rejected_connections,
            state.output_limit_disconnections) == (0, 0, 0, 0)
    assert state.loop_lag.worst_ms(1000.0) == 0.0
    assert {name: t.n for name, t in state.command_calls.items()} == {"ping": 10}  # only grow
    assert state.loop_lag.cumulative[-1] == 1
