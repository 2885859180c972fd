"""EMQ.GET queue id

Returns: the job row as HGETALL gives it (a map: a flat field/value array in
RESP2, fields in the row's own order), or nil (`*-1` in RESP2, `_` in RESP3)
when there is no such job.

Errors: `ERR invalid queue name`, `ERR invalid job id`; `WRONGTYPE` when the
row's key holds a sorted set. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.reply import NULL_ARRAY, Reply
from emqd.rules import args as parse_args
from emqd.store import hash as hashes
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class GetArgs:
    row_key: bytes


def parse(argv: list[bytes], config: Config) -> GetArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    return GetArgs(keys.job(parse_args.job_id(argv[2])))


def plan(args: GetArgs, view: View, now_ms: int, run_id: bytes) -> Reply:
    row = view.hash(args.row_key)
    return NULL_ARRAY if row is None else hashes.as_dict(row)


COMMANDS: Final = [
    verb_command("emq.get", 3, "readonly fast", sys.modules[__name__], summary="A job's row")
]
