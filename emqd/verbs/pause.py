"""EMQ.PAUSE QUEUE

Stops CLAIM from handing out the queue's jobs: `HSET meta paused 1`. Jobs can
still be added, completed, failed and recovered while paused.

Returns: `OK`. Pausing a paused queue writes nothing.

Errors: `ERR invalid queue name`; `WRONGTYPE` when `meta` is a sorted set.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import queue_keys
from emqd.plan import Plan
from emqd.verbs import args as parse_args
from emqd.verbs.runner import HGET, Reads, need, verb_command

PAUSED = b"paused"  # the field of `p.."meta"`; the queue is paused when it holds `1`


def is_paused(value: bytes | None) -> bool:
    """How every verb reads `meta.paused`: `1` is paused, anything else (or absent) is not."""
    return value == b"1"


@dataclass(frozen=True, slots=True)
class PauseArgs:
    meta: bytes


def parse(argv: list[bytes], config: Config) -> PauseArgs:
    return PauseArgs(queue_keys(parse_args.queue_name(argv[1])).meta)


def decide(args: PauseArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    read = (HGET, args.meta, PAUSED)
    if read not in reads:
        return need(read)
    return is_paused(reads[read])


def plan(args: PauseArgs, already: bool, now_ms: int, run_id: bytes) -> Plan:
    return Plan([] if already else [(b"HSET", args.meta, PAUSED, b"1")], "OK")


COMMANDS = [
    verb_command("emq.pause", 2, "write fast", sys.modules[__name__], summary="Stop claims")
]
