"""EMQ.REMOVE queue id

Deletes a job that is not active: its row (with its log, job_log.py), and its
entry in the set its `state` names (pending or its lane, scheduled, waiting,
dead or completed), whatever that state. A waiting lane job leaves with its
lane bookkeeping (lanes.py: the lane count, and the ring when the lane became
empty).
An active job is refused: its holder must finish, fail or requeue it first.
What the job is tied to follows in the same plan (ties.py): a flow's child
removed is settled for its parent (which may run now, or live again when
that child had killed it), a parent's record is deleted with it (its
children go on as jobs of their own), a unique job's key is free.

Returns: 1, or 0 when there was no such job (nothing written).

Errors: `EMQSTATE job is active` (its state is `active`, or it is in
`active`); WRONGTYPE. Every refusal writes nothing.
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
from emqd.rules import job, lanes, ties
from emqd.store import hash as hashes
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class RemoveArgs:
    keys: QueueKeys
    id: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> RemoveArgs:
    return RemoveArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]),
                      config)


def plan(args: RemoveArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = view.hash(keys.job(args.id))
    active = view.zset(keys.active)
    if row is None:
        return Plan([], 0, None, ())
    if hashes.get(row, job.STATE) == job.ACTIVE or (active is not None and args.id in active):
        raise errors.STATE_ACTIVE()
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    end = ties.Ending(view, keys, args.config, now_ms, ledger, [args.id])
    end.ops += job.removal_ops(view, keys, args.id, row, ledger)
    end.happened.append((events.REMOVED, keys.queue, args.id, now_ms, None))
    end.removed(args.id, row)
    return Plan(end.finish(), 1, end.happened, tuple(end.due))


COMMANDS: Final = [
    verb_command("emq.remove", 3, "write fast", sys.modules[__name__],
                 summary="Delete a job that is not active")
]
