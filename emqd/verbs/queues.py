"""EMQ.QUEUES

Returns: the names of every queue that ever held a job (`emq:queues`), in
creation order (its score; equal times in name order, as ZRANGE lists them).
Reads only; `WRONGTYPE` when `emq:queues` is a hash.
"""

from __future__ import annotations

import sys
from typing import Any

from emqd.config import Config
from emqd.keys import QUEUES
from emqd.verbs.runner import ZCARD, ZHEAD, Reads, need, verb_command


def parse(argv: list[bytes], config: Config) -> None:
    return None


def decide(args: None, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    count = (ZCARD, QUEUES)
    if count not in reads:
        return need(count)
    head = (ZHEAD, QUEUES, reads[count])
    if head not in reads:
        return need(head)
    return [name for name, _ in reads[head]]


def plan(args: None, verdict: list, now_ms: int, run_id: bytes) -> list:
    return verdict


COMMANDS = [
    verb_command("emq.queues", 1, "readonly", sys.modules[__name__], summary="Every queue's name")
]
