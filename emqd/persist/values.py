"""Stored values as the commands that rebuild them: HSET / ZADD of their pairs, DEL of keys.

A compaction's snapshot (rewrite.py) writes every key of the keyspace this way,
and a remote sink's write-back of a whole queue (emqd/cluster/sink.py) writes
the queue's keys so: one encoding, `ITEMS_PER_COMMAND` items a command at
most, through records.py's `append_command` (plain commands, or `counted`: runs
of a script's arguments, each with its count first). Not compiled (as
rewrite.py): it reads the store's values as mappings (`items_of`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from emqd.persist.records import append_command
from emqd.store import hash as hashes
from emqd.store.zset import ZSet

ITEMS_PER_COMMAND = 512  # fields, members or keys per HSET / ZADD / DEL

_HSET: Final = b"HSET"
_ZADD: Final = b"ZADD"
_DEL: Final = b"DEL"


def items_of(value: Any, copy: bool) -> tuple[bool, Mapping[Any, Any]]:
    """(is_zset, field -> value or member -> score) of a stored value.

    A small hash (a Row) and a small sorted set (a listpack) are bytes, never
    changed in place: their pairs never change under the snapshot. A BigHash
    or a ZSet is changed in place by later plans, so `copy` takes a copy of it
    before that happens.
    """
    if type(value) is bytes:
        if hashes.is_row(value):
            return False, hashes.as_dict(value)
        return True, _Scores(ZSet(value))
    if type(value) is ZSet:
        scores = _Scores(value)
        return True, dict(scores) if copy else scores
    return False, dict(value) if copy else value


class _Scores(Mapping[Any, Any]):
    """A live sorted set seen as member -> score, without copying it."""

    def __init__(self, zset: ZSet) -> None:
        self.zset = zset

    def __getitem__(self, member: bytes) -> float:
        score = self.zset.score(member)
        if score is None:
            raise KeyError(member)
        return score

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.zset.keys)

    def __len__(self) -> int:
        return len(self.zset)


def append_value(key: bytes, is_zset: bool, items: list[Any], out: list[bytes],
                 counted: bool = False) -> int:
    """HSET key f v ... or ZADD key s m ..., `ITEMS_PER_COMMAND` items a command
    (`counted`: as runs of a script's arguments, the cluster sink's form); how many
    arguments that is, each command's count included."""
    written = 0
    for start in range(0, len(items), ITEMS_PER_COMMAND):
        chunk = items[start : start + ITEMS_PER_COMMAND]
        args: list[Any] = [_ZADD if is_zset else _HSET, key]
        if is_zset:
            for member, score in chunk:
                args.append(score)
                args.append(member)
        else:
            for name, value in chunk:
                args.append(name)
                args.append(value)
        append_command(args, out, counted)
        written += 1 + len(args)
    return written


def append_stored(key: bytes, value: Any, out: list[bytes], counted: bool = False) -> int:
    """A stored value (the keyspace's, as `Keyspace.with_prefix` gives it) as the HSET or
    ZADD commands that rebuild it (`append_value`); how many arguments that is."""
    is_zset, items = items_of(value, copy=False)
    return append_value(key, is_zset, list(items.items()), out, counted)


def append_deletes(keys: Sequence[bytes], out: list[bytes], counted: bool = False) -> int:
    """DEL of `keys`, `ITEMS_PER_COMMAND` keys a command (`counted` as in `append_value`);
    how many arguments that is, each command's count included."""
    written = 0
    for start in range(0, len(keys), ITEMS_PER_COMMAND):
        chunk = keys[start : start + ITEMS_PER_COMMAND]
        append_command([_DEL, *chunk], out, counted)
        written += 2 + len(chunk)
    return written
