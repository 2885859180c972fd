"""EMQ.LOGS queue id [START start] [COUNT count]

The job's log lines (EMQ.LOG; job_log.py), oldest first: from the START-th
line kept (0-based, default 0), at most COUNT of them (default all). Any
client may read them, holder or not, during the job's life and after it, as
long as its row is kept (retention deletes the log with the row).

Returns: an array of bulk strings, the lines without their numbers (empty
when the job logged nothing, or START is past the end).

Errors: `ERR no such job` when the job has no row; `ERR START must be a
non-negative integer`, `ERR COUNT must be a positive integer`; `ERR syntax
error`; `ERR invalid queue name`, `ERR invalid job id`; WRONGTYPE. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job_log
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"START", b"COUNT"})


@dataclass(frozen=True, slots=True)
class LogsArgs:
    keys: QueueKeys
    id: bytes
    start: int
    count: int | None


def parse(argv: list[bytes], config: Config) -> LogsArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    opts = parse_args.options(argv, 3, _KEYWORDS)
    start = opts.get(b"START")
    count = opts.get(b"COUNT")
    return LogsArgs(
        keys,
        job_id,
        0 if start is None else parse_args.non_negative(start, "START"),
        None if count is None else parse_args.positive(count, "COUNT"),
    )


def plan(args: LogsArgs, view: View, now_ms: int, run_id: bytes) -> list[bytes]:
    keys = args.keys
    if view.hash(keys.job(args.id)) is None:
        raise errors.NO_SUCH_JOB()
    log = view.zset(keys.log(args.id))
    if log is None:
        return []
    stop = len(log) if args.count is None else min(len(log), args.start + args.count)
    return [job_log.line_of(stored) for _, stored in log.walk(args.start, stop)]


COMMANDS: Final = [
    verb_command("emq.logs", -3, "readonly", sys.modules[__name__],
                 summary="A job's log lines, oldest first")
]
