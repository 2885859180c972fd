"""EMQ.EPOCH

Returns: the current run_id (bulk string), drawn at every start of the
process; CLAIM and EXTEND stamp it on a row as `lease_epoch`.
"""

from __future__ import annotations

import sys
from typing import Any

from emqd.config import Config
from emqd.verbs.runner import Reads, verb_command


def parse(argv: list[bytes], config: Config) -> None:
    return None


def decide(args: None, reads: Reads, now_ms: int, run_id: bytes) -> bytes:
    return run_id


def plan(args: None, verdict: bytes, now_ms: int, run_id: bytes) -> Any:
    return verdict


COMMANDS = [
    verb_command(
        "emq.epoch", 1, "readonly fast", sys.modules[__name__], summary="The run_id of this process"
    )
]
