"""EMQ.PROMOTE QUEUE [LIMIT n]

Scheduled jobs whose due time is <= now (the first LIMIT, default 1000, in
due order) enter pending (a lane job: its lane, with the lane bookkeeping of
lanes.py) with `state pending`. A job never claimed (no
`attempts`: a delayed ADD) enters for the first time, at the back of its
band with a new sequence number (`priority * 2^40 + seq`, `meta.seq`
written back); a job claimed before (a FAIL's retry) re-enters at the front
of its band (`priority * 2^40`). A member whose row is gone (a ghost) is
removed from `scheduled` and not counted. Charges no counter. Housekeeping
runs this same planner at each queue's earliest due time.

Returns: how many jobs entered pending (integer).

Errors: `ERR LIMIT must be a positive integer`; HINCRBY's text for a corrupt
`meta.seq`; a corrupt `priority`; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.store.hash import incremented
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs.runner import HGET, ZUPTO, Need, Reads, need, verb_command

_KEYWORDS = frozenset({b"LIMIT"})
DEFAULT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class PromoteArgs:
    keys: QueueKeys
    limit: int
    config: Config


@dataclass(frozen=True, slots=True)
class Promoted:
    ops: list[Op]
    count: int


def parse(argv: list[bytes], config: Config) -> PromoteArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    raw_limit = parse_args.options(argv, 2, _KEYWORDS).get(b"LIMIT")
    limit = DEFAULT_LIMIT if raw_limit is None else parse_args.positive(raw_limit, "LIMIT")
    return PromoteArgs(keys, limit, config)


def decide(args: PromoteArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    due_read = (ZUPTO, keys.scheduled, now_ms, args.limit)
    seq_read = (HGET, keys.meta, b"seq")
    if due_read not in reads:
        return need(due_read, seq_read)
    due = reads[due_read]
    if not due:
        return Promoted([], 0)
    missing = [r for m, _ in due if (r := job.row_read(keys, m)) not in reads]
    if missing:
        return need(*missing)
    members = [m for m, _ in due]
    ops: list[Op] = [(b"ZREM", keys.scheduled, *members)]
    seq_raw = reads[seq_read]
    seq = None
    entries = []
    ledger = lanes.Ledger(keys, args.config)
    for member in members:
        row = reads[job.row_read(keys, member)]
        if row is None:
            continue  # a ghost: removed from scheduled, not counted
        if job.ATTEMPTS in row:
            score = job.reentry_score(row)
        else:
            seq = incremented(seq_raw if seq is None else b"%d" % seq, 1)
            score = job.first_entry_score(row, seq)
        ops += job.enter_ops(keys, member, row, score, ledger=ledger)
        entries.append(job.entry_check(keys, row))
    missing = [r for r in entries if r not in reads]
    if missing:  # the lanes' reads ahead: settle needs them next
        rows = [reads[job.row_read(keys, m)] for m in members]
        return need(*missing, ahead=lanes.prefetch_rows(keys, rows))
    lane_ops = lanes.settle(ledger, reads)
    if type(lane_ops) is Need:
        return lane_ops
    if seq is not None:
        ops.append((b"HSET", keys.meta, b"seq", b"%d" % seq))
    return Promoted(ops + lane_ops, len(entries))  # type: ignore[operator]


def plan(args: PromoteArgs, verdict: Promoted, now_ms: int, run_id: bytes) -> Plan:
    return Plan(verdict.ops, verdict.count)


COMMANDS = [
    verb_command("emq.promote", -2, "write", sys.modules[__name__],
                 summary="Move due scheduled jobs to pending")
]
