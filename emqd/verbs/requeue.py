"""EMQ.REQUEUE QUEUE ID TOKEN

The holder gives the job back without failing it. The plan for a flat job is
exactly three writes: `ZREM active`, `HSET state pending`, `ZADD pending
<re-entry score> id` (the front of its priority band, `priority * 2^40`). No
counter, no `last_error`, no metric: the job keeps its whole retry budget,
and the next CLAIM's token is one higher, so this holder's token is stale.

Returns: `OK`.

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; a corrupt
row `priority`; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Plan
from emqd.verbs import args as parse_args
from emqd.verbs import job
from emqd.verbs.runner import Need, Reads, need, verb_command


@dataclass(frozen=True, slots=True)
class RequeueArgs:
    keys: QueueKeys
    id: bytes
    token: bytes


@dataclass(frozen=True, slots=True)
class Requeued:
    row: dict
    score: int


def parse(argv: list[bytes], config: Config) -> RequeueArgs:
    return RequeueArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                       argv[3])


def decide(args: RequeueArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    row = job.held(keys, args.id, args.token, reads)
    if type(row) is Need:
        return row
    check = job.entry_check(keys, row)  # type: ignore[arg-type]
    if check not in reads:
        return need(check)
    return Requeued(row, job.reentry_score(row))  # type: ignore[arg-type]


def plan(args: RequeueArgs, verdict: Requeued, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    return Plan(
        [
            *job.leave_active_ops(keys, args.id, verdict.row),
            *job.enter_ops(keys, args.id, verdict.row, verdict.score),
        ],
        "OK",
    )


COMMANDS = [
    verb_command("emq.requeue", 4, "write fast", sys.modules[__name__],
                 summary="Give a claimed job back without failing it")
]
