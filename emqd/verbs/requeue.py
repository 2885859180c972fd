"""EMQ.REQUEUE QUEUE ID TOKEN

The holder gives the job back without failing it. The plan for a flat job is
exactly three writes: `ZREM active`, `HSET state pending`, `ZADD pending
<re-entry score> id` (the front of its priority band, `priority * 2^40`). A
lane job's ZADD goes to its lane, and its slot is given back (lanes.py). No
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
from emqd.plan import Op, Plan
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs.runner import Need, Reads, need, verb_command


@dataclass(frozen=True, slots=True)
class RequeueArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> RequeueArgs:
    return RequeueArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                       argv[3], config)


def decide(args: RequeueArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    row = job.held(keys, args.id, args.token, reads)
    if type(row) is Need:
        return row
    check = job.entry_check(keys, row)  # type: ignore[arg-type]
    if check not in reads:
        return need(check, ahead=lanes.prefetch(keys, row))  # type: ignore[arg-type]
    ledger = lanes.Ledger(keys, args.config)
    ops = [
        *job.leave_active_ops(keys, args.id, row, ledger),  # type: ignore[arg-type]
        *job.enter_ops(keys, args.id, row, job.reentry_score(row), ledger=ledger),  # type: ignore[arg-type]
    ]
    lane_ops = lanes.settle(ledger, reads)
    if type(lane_ops) is Need:
        return lane_ops
    return ops + lane_ops  # type: ignore[operator]


def plan(args: RequeueArgs, ops: list[Op], now_ms: int, run_id: bytes) -> Plan:
    return Plan(ops, "OK")


COMMANDS = [
    verb_command("emq.requeue", 4, "write fast", sys.modules[__name__],
                 summary="Give a claimed job back without failing it")
]
