"""Driving planners directly: a keyspace built from plain data, no sockets.

`drive(verb, argv, keyspace, now, run_id)` parses with a default Config, runs
the read/decide loop against the keyspace, and returns what the verb would
answer (a Plan, a Block, a reply value, or the ReplyError it raised). Nothing
is applied: `commit(keyspace, result)` applies a plan when a test wants the
state after it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from emqd.config import Config
from emqd.errors import ReplyError
from emqd.plan import Plan
from emqd.store.keyspace import Keyspace
from emqd.store.zset import ZSet
from emqd.verbs.runner import decide_and_plan

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
        return {_b(k): _b(v) for k, v in value.items()}
    zset = ZSet()
    for member, score in value:
        zset.add(_b(member), float(score))
    return zset


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def drive(verb: ModuleType, argv: list[Any], space: Keyspace, now: int = NOW,
          run_id: bytes = RUN_ID, config: Config | None = None) -> Any:
    raw = [_b(a) for a in argv]
    try:
        args = verb.parse(raw, config or Config())
        return decide_and_plan(verb, space, args, now, run_id)
    except ReplyError as error:
        return error


def commit(space: Keyspace, result: Any) -> Any:
    """Apply a Plan's ops; the reply."""
    assert isinstance(result, Plan), result
    space.apply(result.ops)
    return result.reply
