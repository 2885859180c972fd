"""EMQ.REVIVE queue id [RESET]

The dead-letter return: a dead job re-enters pending (a lane job: its lane,
with the lane bookkeeping of lanes.py) at the front of its band (`ZREM
dead`, `state pending`, `ZADD pending`). Charges no counter; with
RESET, `failures` and `stalled` are deleted so that the job has its whole
budget again. `last_error` and `finished_ms` stay, as history. A flow's
child that is revived no longer counts against its parent: a parent that
died of it (and of no other child) waits again, in the same plan (flows.py).
A parent that died of a child is not revived itself: it runs when its
children are done, so its dead child is the one to revive (or to remove, to
go on without it). A unique job takes its key back when nobody holds it
(unique.py).

Returns: `OK`.

Errors: `EMQSTATE job is not dead` (no row, or its state is not `dead`);
`EMQSTATE job died of a child: ...` for a flow's parent that died of a child;
`ERR syntax error`; a corrupt `priority`; WRONGTYPE. Every refusal writes
nothing.
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
from emqd.rules import flows, job, lanes, ties
from emqd.store import hash as hashes
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class ReviveArgs:
    keys: QueueKeys
    id: bytes
    reset: bool
    config: Config


def parse(argv: list[bytes], config: Config) -> ReviveArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    opts = parse_args.options(argv, 3, frozenset(), flags=frozenset({b"RESET"}))
    return ReviveArgs(keys, job_id, b"RESET" in opts, config)


def plan(args: ReviveArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = view.hash(keys.job(args.id))
    view.check_zset(keys.dead)
    if row is None or hashes.get(row, job.STATE) != job.DEAD:
        raise errors.STATE_NOT_DEAD()
    if hashes.has(row, flows.LEFT):
        raise errors.STATE_DEAD_OF_CHILD()
    job.check_entry(view, keys, row)
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    end = ties.Ending(view, keys, args.config, now_ms, ledger, [args.id])
    end.ops.append((b"ZREM", keys.dead, args.id))
    if args.reset:
        end.ops.append((b"HDEL", keys.job(args.id), job.FAILURES, job.STALLED))
    end.ops += job.enter_ops(keys, args.id, row, job.reentry_score(row), ledger=ledger,
                             ready_ms=now_ms)
    end.happened.append((events.REVIVED, keys.queue, args.id, now_ms, None))
    end.revived(args.id, row)
    ops = [*end.finish(), job.count_op(view, keys, b"revived")]
    return Plan(ops, "OK", end.happened, tuple(end.due))


COMMANDS: Final = [
    verb_command("emq.revive", -3, "write fast", sys.modules[__name__],
                 summary="Return a dead job to pending")
]
