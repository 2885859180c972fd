"""EMQ.REQUEUE queue id token

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
from typing import Final

from emqd import events
from emqd.command import verb_command
from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Plan
from emqd.rules import args as parse_args
from emqd.rules import job, lanes
from emqd.store.keyspace import View


@dataclass(slots=True)
class RequeueArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> RequeueArgs:
    return RequeueArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                       argv[3], config)


def plan(args: RequeueArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = job.held(view, keys, args.id, args.token)
    job.check_entry(view, keys, row)
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    ops = [
        *job.leave_active_ops(keys, args.id, row, ledger),
        *job.enter_ops(keys, args.id, row, job.reentry_score(row), ledger=ledger,
                       ready_ms=now_ms),
        *lanes.settle(ledger),
    ]
    return Plan(ops, "OK", [(events.RECOVERED, keys.queue, args.id, now_ms, None)], ())


COMMANDS: Final = [
    verb_command("emq.requeue", 4, "write fast", sys.modules[__name__],
                 summary="Give a claimed job back without failing it")
]
