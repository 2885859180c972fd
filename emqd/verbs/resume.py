"""EMQ.RESUME queue

Lets CLAIM serve the queue again: `HDEL meta paused`. Blocking CLAIMs watch
the queue's `meta` key, so this write wakes the clients parked on the queue.

Returns: `OK`. Resuming a queue that is not paused writes nothing.

Errors: `ERR invalid queue name`; `WRONGTYPE` when `meta` is a sorted set.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.store.keyspace import View
from emqd.verbs.pause import PAUSED, PauseArgs, paused_value
from emqd.verbs.pause import parse as parse_pause


def parse(argv: list[bytes], config: Config) -> PauseArgs:
    return parse_pause(argv, config)


def plan(args: PauseArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    if paused_value(view, args) is None:
        return Plan([], "OK", None, ())
    return Plan([(b"HDEL", args.meta, PAUSED)], "OK",
                [(events.RESUMED, args.queue, b"", now_ms, None)], ())


COMMANDS: Final = [
    verb_command("emq.resume", 2, "write fast", sys.modules[__name__], summary="Serve claims again")
]
