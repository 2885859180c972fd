"""EMQ.PAUSE queue

Stops CLAIM from handing out the queue's jobs: `HSET meta paused 1`. Jobs can
still be added, completed, failed and recovered while paused.

Returns: `OK`. Pausing a paused queue writes nothing.

Errors: `ERR invalid queue name`; `WRONGTYPE` when `meta` is a sorted set.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.rules import args as parse_args
from emqd.store import hash as hashes
from emqd.store.keyspace import View

PAUSED: Final = b"paused"  # the field of `p.."meta"`; the queue is paused when it holds `1`


def is_paused(value: bytes | None) -> bool:
    """How every verb reads `meta.paused`: `1` is paused, anything else (or absent) is not."""
    return value == b"1"


@dataclass(frozen=True, slots=True)
class PauseArgs:
    queue: bytes
    meta: bytes


def parse(argv: list[bytes], config: Config) -> PauseArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    return PauseArgs(keys.queue, keys.meta)


def paused_value(view: View, args: PauseArgs) -> bytes | None:
    meta = view.hash(args.meta)
    return None if meta is None else hashes.get(meta, PAUSED)


def plan(args: PauseArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    if is_paused(paused_value(view, args)):
        return Plan([], "OK", None, ())
    return Plan([(b"HSET", args.meta, PAUSED, b"1")], "OK",
                [(events.PAUSED, args.queue, b"", now_ms, None)], ())


COMMANDS: Final = [
    verb_command("emq.pause", 2, "write fast", sys.modules[__name__], summary="Stop claims")
]
