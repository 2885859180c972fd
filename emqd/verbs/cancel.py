"""EMQ.CANCEL queue id [REASON reason]

Ends a job that has not finished, whatever it is doing, for good: pending (or in
its lane), scheduled, waiting for its children, or active. It leaves its set (an
active job leaves `active` and gives its lane slot back) and enters
`cancelled` (score: now) with `state cancelled`, `finished_ms`, and
`cancel_reason` when REASON is given; `metrics cancelled` one higher; and the
retention trim of `cancelled`, which keeps them by the queue's `keep_completed`
and `keep_completed_ms` (retention.py). It is not retried and not
dead-lettered, and no verb brings it back (REVIVE takes dead jobs only).

An active job's holder learns it at its next call about the job: EXTEND,
PROGRESS, LOG, COMPLETE, FAIL and REQUEUE with its token answer `EMQCANCELLED
job was cancelled[: reason]` (job.held) and write nothing; the token is never
accepted again, and the stall sweep never sees the job (it is not in
`active`). Its lane slot is free at once: the handler may still run until its
worker's next call (protocol section 22.2).

What the job is tied to settles in the same plan (ties.py): a flow's parent
sees the cancelled child as its ONCHILDFAIL rule says (`fail`: it dies,
`last_error` `child cancelled: <key>`; `ignore`: the child is settled;
`remove`: it dies and its children that are not running are removed); a
unique job's key is free. A cancelled parent keeps its record while its row
lives; its children go on as jobs of their own, and its counters
(`children_left`, `children_dead`) are deleted, since it will not run.

Returns: the state the job was cancelled from (`pending`, `scheduled`,
`waiting` or `active`), or nil when there is no such job (nothing written).

Errors: `EMQSTATE job is completed` (`dead`, `cancelled`: a job that already
finished); `ERR REASON exceeds 4096 bytes`; `ERR syntax error`; `ERR job field
'state' holds an invalid value` for a row a client's write left in no state;
a corrupt counter or setting the plan depends on; WRONGTYPE. Every refusal
writes nothing.
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
from emqd.rules import settings as queue_settings
from emqd.rules.job_log import MAX_LINE
from emqd.store import hash as hashes
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"REASON"})
REASON_TOO_LONG: Final = errors.too_long("REASON", MAX_LINE)
_LIVE: Final = (job.PENDING, job.SCHEDULED, job.WAITING, job.ACTIVE)
_FINISHED: Final = (job.COMPLETED, job.DEAD, job.CANCELLED)


@dataclass(frozen=True, slots=True)
class CancelArgs:
    keys: QueueKeys
    id: bytes
    reason: bytes | None
    config: Config


def parse(argv: list[bytes], config: Config) -> CancelArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    reason = parse_args.options(argv, 3, _KEYWORDS).get(b"REASON") if len(argv) > 3 else None
    if reason is not None and len(reason) > MAX_LINE:
        raise REASON_TOO_LONG()
    return CancelArgs(keys, job_id, reason, config)


def plan(args: CancelArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = view.hash(keys.job(args.id))
    active = view.zset(keys.active)
    if row is None:
        return Plan([], None, None, ())
    state = hashes.get(row, job.STATE)
    if active is not None and args.id in active:
        state = job.ACTIVE  # held, whatever its row says: it leaves `active`
    if state is not None and state in _FINISHED:
        raise errors.state_is(state)
    if state not in _LIVE:
        raise errors.corrupt_job_field(job.STATE)
    view.check_zset(keys.cancelled)  # its type, before the plan ZADDs there
    settings = queue_settings.of_queue(view, keys, args.config)
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    end = ties.Ending(view, keys, args.config, now_ms, ledger, [args.id], job.CANCELLED,
                      settings)
    if state == job.ACTIVE:
        end.ops += job.leave_active_ops(keys, args.id, row, ledger)
    else:
        end.ops += job.leave_set_ops(view, keys, args.id, row, ledger)
    fields: tuple[bytes, ...] = () if args.reason is None else (job.CANCEL_REASON, args.reason)
    end.ops.append(job.ended_row_op(keys, args.id, now_ms, job.CANCELLED, fields))
    counters = [name for name in (flows.LEFT, flows.DEAD_CHILDREN) if hashes.has(row, name)]
    if counters:  # a parent that will not run: its children no longer count for it
        end.ops.append((b"HDEL", keys.job(args.id), *counters))
    extra = None if args.reason is None else {"reason": args.reason}
    end.happened.append((events.CANCELLED, keys.queue, args.id, now_ms, extra))
    end.cancelled(args.id, row)
    return Plan(end.finish(), state, end.happened, tuple(end.due))


COMMANDS: Final = [
    verb_command("emq.cancel", -3, "write fast", sys.modules[__name__],
                 summary="End a job that has not finished, running or not, for good")
]
