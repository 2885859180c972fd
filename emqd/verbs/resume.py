"""EMQ.RESUME QUEUE

Lets CLAIM serve the queue again: `HDEL meta paused`. Blocking CLAIMs watch
the queue's `meta` key, so this write wakes the clients parked on the queue.

Returns: `OK`. Resuming a queue that is not paused writes nothing.

Errors: `ERR invalid queue name`; `WRONGTYPE` when `meta` is a sorted set.
"""

from __future__ import annotations

import sys
from typing import Any

from emqd.config import Config
from emqd.plan import Plan
from emqd.verbs.pause import PAUSED, PauseArgs
from emqd.verbs.pause import parse as parse_pause
from emqd.verbs.runner import HGET, Reads, need, verb_command


def parse(argv: list[bytes], config: Config) -> PauseArgs:
    return parse_pause(argv, config)


def decide(args: PauseArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    read = (HGET, args.meta, PAUSED)
    if read not in reads:
        return need(read)
    return reads[read] is not None


def plan(args: PauseArgs, present: bool, now_ms: int, run_id: bytes) -> Plan:
    return Plan([(b"HDEL", args.meta, PAUSED)] if present else [], "OK")


COMMANDS = [
    verb_command("emq.resume", 2, "write fast", sys.modules[__name__], summary="Serve claims again")
]
