"""EMQ.REMOVE QUEUE ID

Deletes a job that is not active: its row (with its log, job_log.py), and its
entry in the set its `state` names (pending or its lane, scheduled, dead or
completed), whatever that state. A waiting lane job leaves with its lane bookkeeping (lanes.py:
the lane count, and the ring when the lane became empty).
An active job is refused: its holder must finish, fail or requeue it first.

Returns: 1, or 0 when there was no such job (nothing written).

Errors: `EMQSTATE job is active` (its state is `active`, or it is in
`active`); WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from emqd import errors, events
from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.store import hash as hashes
from emqd.store.hash import Hash
from emqd.store.keyspace import View
from emqd.verbs import args as parse_args
from emqd.verbs import job, job_log, lanes
from emqd.verbs.runner import verb_command


@dataclass(frozen=True, slots=True)
class RemoveArgs:
    keys: QueueKeys
    id: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> RemoveArgs:
    return RemoveArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                      config)


def _set_of(keys: QueueKeys, row: Hash) -> bytes | None:
    """The set a job that is not active sits in, by its state (None for an unknown state)."""
    state = hashes.get(row, job.STATE)
    if state == job.PENDING:
        return job.entry_key(keys, row)
    return {
        job.SCHEDULED: keys.scheduled,
        job.DEAD: keys.dead,
        job.COMPLETED: keys.completed,
    }.get(state)  # type: ignore[arg-type]


def plan(args: RemoveArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = view.hash(keys.job(args.id))
    active = view.zset(keys.active)
    if row is None:
        return Plan([], 0, None, ())
    if hashes.get(row, job.STATE) == job.ACTIVE or (active is not None and args.id in active):
        raise errors.STATE_ACTIVE()
    ops: list[Op] = [job_log.del_op(view, keys, [args.id])]
    zkey = _set_of(keys, row)
    if zkey is not None:
        zset = view.zset(zkey)
        ops.append((b"ZREM", zkey, args.id))
        if hashes.get(row, job.STATE) == job.PENDING and zset is not None and args.id in zset:
            # a waiting job leaves: the ring, the count
            ledger = lanes.Ledger(view, keys, args.config)
            ledger.leave_waiting(lanes.group_of(row))
            ops += lanes.settle(ledger)
    return Plan(ops, 1, [(events.REMOVED, keys.queue, args.id, now_ms, None)], ())


COMMANDS = [
    verb_command("emq.remove", 3, "write fast", sys.modules[__name__],
                 summary="Delete a job that is not active")
]
