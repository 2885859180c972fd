"""Driving planners directly: a keyspace built from plain data, no sockets.

`drive(verb, argv, keyspace, now, run_id)` parses with a default Config, runs
the planner against the keyspace, and returns what the verb would answer (a
Plan, a Block, a reply value, or the ReplyError it raised). Nothing is
applied: `commit(keyspace, result)` applies a plan when a test wants the
state after it. The store keeps small hashes as compact rows: `hash_of` reads
one back as a plain dict, `set_field` changes one as a client's HSET would.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.persist.records import text
from emqd.store import hash as hashes
from emqd.store.keyspace import Keyspace, View
from emqd.store.zset import ZSet

RUN_ID = b"a" * 40
OTHER_RUN_ID = b"b" * 40
NOW = 1_700_000_000_000


def keyspace(**keys: Any) -> Keyspace:
    """A keyspace from {key: dict (hash) | list of (member, score) (zset)}."""
    space = Keyspace()
    for key, value in keys.items():
        space.data[key.encode()] = _value(value)
    return space


def held(job_row: dict, deadline: int = NOW + 10, **extra: Any) -> Keyspace:
    """Queue `q` with job `1` claimed: `job_row` under its key, leased in `active` until
    `deadline`; `extra` keys as `keyspace` takes them."""
    return keyspace(**{"emq:{q}:job:1": job_row, "emq:{q}:active": [("1", deadline)], **extra})


def build(data: dict[bytes, Any]) -> Keyspace:
    space = Keyspace()
    for key, value in data.items():
        space.data[key] = _value(value)
    return space


def _value(value: Any) -> Any:
    if isinstance(value, dict):
        pairs = [(_b(k), _b(v)) for k, v in value.items()]
        return hashes.written(None, tuple(k for k, _ in pairs), tuple(v for _, v in pairs),
                              hashes.Limits())
    zset = ZSet()
    for member, score in value:
        zset.add(_b(member), float(score))
    return zset


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def sliced(planner: ModuleType, limit: int = 100) -> Any:
    """A housekeeping planner (`slice_args`, `plan`) in a verb's shape, so that `drive` and
    `run` take it: its argv is just `[QUEUE]`, and it plans a slice of `limit`."""
    return SimpleNamespace(
        parse=lambda argv, config: planner.slice_args(argv[0], limit, config),
        plan=planner.plan)


def drive(verb: ModuleType, argv: list[Any], space: Keyspace, now: int = NOW,
          run_id: bytes = RUN_ID, config: Config | None = None) -> Any:
    raw = [_b(a) for a in argv]
    try:
        args = verb.parse(raw, config or Config())
        return verb.plan(args, space, now, run_id)
    except ReplyError as error:
        return error


def commit(space: Keyspace, result: Any) -> Any:
    """Apply a Plan's ops; the reply."""
    assert isinstance(result, Plan), result
    space.apply(result.ops)
    return result.reply


def hash_of(space: Keyspace, key: bytes) -> dict | None:
    """The hash at `key` as a plain dict (None when absent)."""
    row = space.hash(key)
    return None if row is None else hashes.as_dict(row)


def set_field(space: Keyspace, key: bytes, name: bytes, value: bytes) -> None:
    """What a client's `HSET key name value` does to the store (tests that corrupt a row)."""
    space.apply([(b"HSET", key, name, value)])


def effects(result: Any) -> Any:
    """What a plan does, for comparing with an expected one: its ops with every value as
    the bytes the log holds (a template writes b"5", a hand-built op 5) and its reply.
    Anything that is not a Plan (a refusal, a Block) is returned as it is."""
    if not isinstance(result, Plan):
        return result
    return [tuple(text(v) for v in op) for op in result.ops], result.reply


class KeysRead(View):
    """A planner's View over `space` that notes every key it reads and hands back the store's
    own values (so that it serves a compiled core too, unlike RecordingView's counted sets)."""

    def __init__(self, space: Keyspace) -> None:
        self.space = space
        self.keys: list[bytes] = []

    def hash(self, key: bytes) -> Any:
        self.keys.append(key)
        return self.space.hash(key)

    def zset(self, key: bytes) -> Any:
        self.keys.append(key)
        return self.space.zset(key)

    def type_name(self, key: bytes) -> str:
        self.keys.append(key)
        return self.space.type_name(key)


class RecordingView(View):
    """A planner's View over `space` that lists every read it makes, in order.

    Each `hash` / `zset` / `type_name` call is one entry (kind, key); walking a
    sorted set's members from the front adds one ("member", key) per member
    taken, so a test can see that a planner's work does not grow with a set
    it only looks at the front of.
    """

    def __init__(self, space: Keyspace) -> None:
        self.space = space
        self.reads: list[tuple[str, bytes]] = []

    def hash(self, key: bytes) -> Any:
        self.reads.append(("hash", key))
        return self.space.hash(key)

    def zset(self, key: bytes) -> Any:
        self.reads.append(("zset", key))
        zset = self.space.zset(key)
        return None if zset is None else _CountedZSet(zset, key, self.reads)

    def type_name(self, key: bytes) -> str:
        self.reads.append(("type", key))
        return self.space.type_name(key)


class _CountedZSet:
    """A ZSet whose walks from the front are counted member by member."""

    def __init__(self, zset: ZSet, key: bytes, reads: list) -> None:
        self._zset, self._key, self._reads = zset, key, reads

    def members(self) -> Any:
        for member in self._zset.members():
            self._reads.append(("member", self._key))
            yield member

    def __getattr__(self, name: str) -> Any:
        return getattr(self._zset, name)

    def __len__(self) -> int:
        return len(self._zset)

    def __contains__(self, member: bytes) -> bool:
        return member in self._zset

    def __iter__(self) -> Any:
        return iter(self._zset)
