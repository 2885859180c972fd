"""EMQ.REMOVE QUEUE ID

Deletes a job that is not active: its row, and its entry in the set its
`state` names (pending or its lane, scheduled, dead or completed), whatever
that state. A waiting lane job leaves with its lane bookkeeping (lanes.py:
the lane count, and the ring when the lane became empty).
An active job is refused: its holder must finish, fail or requeue it first.

Returns: 1, or 0 when there was no such job (nothing written).

Errors: `EMQSTATE job is active` (its state is `active`, or it is in
`active`); WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd import errors
from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs.runner import ZSCORE, Need, Reads, need, verb_command


@dataclass(frozen=True, slots=True)
class RemoveArgs:
    keys: QueueKeys
    id: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> RemoveArgs:
    return RemoveArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                      config)


def _set_of(keys: QueueKeys, row: dict) -> bytes | None:
    """The set a job that is not active sits in, by its state (None for an unknown state)."""
    state = row.get(job.STATE)
    if state == job.PENDING:
        return job.entry_key(keys, row)
    return {
        job.SCHEDULED: keys.scheduled,
        job.DEAD: keys.dead,
        job.COMPLETED: keys.completed,
    }.get(state)  # type: ignore[arg-type]


def decide(args: RemoveArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    row_r = job.row_read(keys, args.id)
    active_r = (ZSCORE, keys.active, args.id)
    if row_r not in reads:
        return need(row_r, active_r)
    row = reads[row_r]
    if row is None:
        return []
    if row.get(job.STATE) == job.ACTIVE or reads[active_r] is not None:
        raise errors.STATE_ACTIVE()
    ops: list[Op] = [(b"DEL", keys.job(args.id))]
    zset = _set_of(keys, row)
    if zset is not None:
        check = (ZSCORE, zset, args.id)
        if check not in reads:
            return need(check, ahead=lanes.prefetch(keys, row))
        ops.append((b"ZREM", zset, args.id))
        if row.get(job.STATE) == job.PENDING and reads[check] is not None:
            ledger = lanes.Ledger(keys, args.config)  # a waiting job leaves: the ring, the count
            ledger.leave_waiting(lanes.group_of(row))
            lane_ops = lanes.settle(ledger, reads)
            if type(lane_ops) is Need:
                return lane_ops
            ops += lane_ops  # type: ignore[arg-type]
    return ops


def plan(args: RemoveArgs, ops: list[Op], now_ms: int, run_id: bytes) -> Plan:
    return Plan(ops, 1 if ops else 0)


COMMANDS = [
    verb_command("emq.remove", 3, "write fast", sys.modules[__name__],
                 summary="Delete a job that is not active")
]
