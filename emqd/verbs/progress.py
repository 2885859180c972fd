"""EMQ.PROGRESS queue id token value

The holder of TOKEN records how far it got: VALUE is any bulk string up to
4 KiB (a percentage, a count, a JSON document), kept in the row's `progress`
field, where EMQ.GET shows it, and published as the queue's `progress` event
with that value. Checked like EXTEND (`job.held`). Plan: `HSET row progress
VALUE`, and nothing else: no counter, no lease change (a holder that needs
more time says so with EXTEND).

Returns: `OK`.

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; `ERR VALUE
exceeds 4096 bytes`; `ERR invalid queue name`, `ERR invalid job id`; WRONGTYPE.
Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job
from emqd.rules.job_log import MAX_LINE
from emqd.store.keyspace import View

PROGRESS: Final = b"progress"
VALUE_TOO_LONG: Final = errors.too_long("VALUE", MAX_LINE)


@dataclass(slots=True)
class ProgressArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    value: bytes


def parse(argv: list[bytes], config: Config) -> ProgressArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    if len(argv[4]) > MAX_LINE:
        raise VALUE_TOO_LONG()
    return ProgressArgs(keys, job_id, argv[3], argv[4])


def plan(args: ProgressArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    job.held(view, keys, args.id, args.token)
    return Plan(
        [(b"HSET", keys.job(args.id), PROGRESS, args.value)],
        "OK",
        [(events.PROGRESS, keys.queue, args.id, now_ms, {"value": args.value})],
        (),
    )


COMMANDS: Final = [
    verb_command("emq.progress", 5, "write fast", sys.modules[__name__],
                 summary="Record a claimed job's progress")
]
