"""The core's run-time changes: CONFIG SET's `reconfigure`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core
from emqd.store import hash as hashes


@pytest.fixture
def emqd_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("emqd")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_reconfigure_replaces_the_config_and_tells_the_store_and_the_logger(
        emqd_logger: logging.Logger) -> None:
    state = Core(Config(hash_max_listpack_entries=2))
    old = state.config
    assert state.keyspace.limits.hash_entries == 2  # the flags reach the store at start
    state.commit.apply(Plan([(b"HSET", b"h", b"a", b"1", b"b", b"2")]))
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
    state.commit.apply(Plan([(b"HSET", b"h", b"a", b"2")]))
    row = state.keyspace.hash(b"h")
    assert row is not None and not hashes.is_listpack(row)
