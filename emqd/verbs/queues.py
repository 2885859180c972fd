"""EMQ.QUEUES

Returns: the names of every queue that ever held a job (`emq:queues`), in
creation order (its score; equal times in name order, as ZRANGE lists them).
Reads only; `WRONGTYPE` when `emq:queues` is a hash.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QUEUES
from emqd.store.keyspace import View


def parse(argv: list[bytes], config: Config) -> None:
    return None


def plan(args: None, view: View, now_ms: int, run_id: bytes) -> list[bytes]:
    queues = view.zset(QUEUES)
    return [] if queues is None else list(queues.members())


COMMANDS: Final = [
    verb_command("emq.queues", 1, "readonly", sys.modules[__name__], summary="Every queue's name")
]
