"""EMQ.EPOCH

Returns: the current run_id (bulk string), drawn at every start of the
process; CLAIM and EXTEND stamp it on a row as `lease_epoch`.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.store.keyspace import View


def parse(argv: list[bytes], config: Config) -> None:
    return None


def plan(args: None, view: View, now_ms: int, run_id: bytes) -> bytes:
    return run_id


COMMANDS: Final = [
    verb_command(
        "emq.epoch", 1, "readonly fast", sys.modules[__name__], summary="The run_id of this process"
    )
]
