"""Stored values as the commands that rebuild them (emqd/persist/values.py)."""

from __future__ import annotations

import hiredis
import pytest

from emqd.persist.values import ITEMS_PER_COMMAND, append_deletes, append_stored, items_of
from emqd.store.keyspace import Keyspace


def parse_all(data: bytes) -> list:
    reader = hiredis.Reader()
    reader.feed(data)
    out = []
    while (item := reader.gets()) is not False:
        out.append(item)
    return out


def _contents(space: Keyspace) -> dict[bytes, tuple[bool, dict]]:
    return {key: (is_zset, dict(items)) for key, value in space.with_prefix(b"")
            for is_zset, items in [items_of(value, copy=True)]}


@pytest.mark.parametrize("counted", [False, True])
def test_stored_values_and_deletes_rebuild_the_keyspace(counted: bool) -> None:
    """What a compaction and a remote write-back write: DELs of the keys first, then each
    stored value (a small and a big hash, a small and a big sorted set) as its commands,
    split at ITEMS_PER_COMMAND; replayed over other data they leave the same keyspace,
    and the count returned is the arguments written (each command's count included)."""
    big = ITEMS_PER_COMMAND + 7
    source = Keyspace()
    source.apply([(b"HSET", b"h:small", b"f", b"v", b"g", b"1"),
                  (b"HSET", b"h:big", *[x for i in range(big) for x in (b"f%d" % i, b"v")]),
                  (b"ZADD", b"z:small", 1.5, b"a", float("-inf"), b"b"),
                  (b"ZADD", b"z:big", *[x for i in range(big) for x in (i / 3, b"m%d" % i)])])
    held = source.with_prefix(b"")
    doomed = [b"gone:%d" % i for i in range(big)] + [key for key, _ in held]
    out: list[bytes] = []
    count = append_deletes(doomed, out, counted)
    for key, value in held:
        count += append_stored(key, value, out, counted)
    target = Keyspace()
    target.apply([(b"HSET", b"h:big", b"stale", b"x"), (b"ZADD", b"z:small", 9, b"stale"),
                  *[(b"HSET", key, b"f", b"v") for key in doomed[:big]]])
    data = b"".join(out)
    if counted:  # runs of a script's arguments: a count, then that many arguments
        flat = parse_all(b"*%d\r\n" % count + data)[0]
        commands, at = [], 0
        while at < len(flat):
            commands.append(flat[at + 1:at + 1 + int(flat[at])])
            at += int(flat[at]) + 1
    else:
        commands = parse_all(data)
        assert count == sum(1 + len(command) for command in commands)
    assert all(len(command) <= 2 + 2 * ITEMS_PER_COMMAND for command in commands)
    target.apply([tuple(command) for command in commands])
    assert _contents(target) == _contents(source)
