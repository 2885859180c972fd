"""The keyspace notes the watched keys each write touches: parked clients are woken by
them (emqd/sessions/blocking.py), so a DEL of several keys or a FLUSHALL must name every one."""

from __future__ import annotations

from emqd.store.keyspace import Keyspace


def watching(*keys: bytes) -> Keyspace:
    space = Keyspace()
    space.apply([(b"HSET", b"a", b"f", b"v"), (b"HSET", b"b", b"f", b"v"),
                 (b"ZADD", b"z", 1, b"m")])
    space.take_ready()
    for key in keys:
        space.watched[key] = 1
    return space


def test_a_write_notes_its_key_when_watched() -> None:
    space = watching(b"a", b"z")
    space.apply([(b"HSET", b"a", b"g", b"w"), (b"HSET", b"b", b"g", b"w")])
    assert space.take_ready() == {b"a"}
    space.apply([(b"ZREM", b"z", b"m")])
    assert space.take_ready() == {b"z"}


def test_every_key_of_a_del_is_noted() -> None:
    space = watching(b"b", b"z")
    space.apply([(b"DEL", b"a", b"b", b"z")])
    assert space.take_ready() == {b"b", b"z"}


def test_flushall_notes_every_watched_key() -> None:
    space = watching(b"a", b"absent")
    space.apply([(b"FLUSHALL",)])
    assert space.take_ready() == {b"a", b"absent"}


def test_nothing_is_noted_while_nobody_waits() -> None:
    space = watching()
    space.apply([(b"DEL", b"a", b"b"), (b"FLUSHALL",)])
    assert space.take_ready() == set()
