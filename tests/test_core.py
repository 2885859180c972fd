"""The core's run-time changes (CONFIG SET's `reconfigure`), and the queues it holds."""

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


def test_without_epochs_every_queue_is_held_under_the_run_id() -> None:
    state = Core(Config(), run_id="r" * 40)
    assert state.holds(b"any") and state.epoch_of(b"any") == b"r" * 40


def test_with_epochs_only_the_queues_in_them_are_held_each_under_its_own() -> None:
    """A router's process (cluster mode) holds some queues, each under a term; the dict
    is the one it keeps, so a queue it takes or lets go is seen at once."""
    epochs = {b"mine": b"term-1"}
    state = Core(Config(), run_id="r" * 40, epochs=epochs)
    assert state.holds(b"mine") and state.epoch_of(b"mine") == b"term-1"
    assert not state.holds(b"theirs")
    del epochs[b"mine"]
    epochs[b"theirs"] = b"term-2"
    assert not state.holds(b"mine") and state.holds(b"theirs")
    assert state.epoch_of(b"theirs") == b"term-2"
