"""EMQ.STALLED.CHECK queue [MAXSTALLED max-stalled] [LIMIT limit]

The one recovery verb (there is no reaper): jobs whose lease ran out go back
to pending, or die when their stall budget is spent. Housekeeping runs this
same planner for every queue (protocol section 6.4).

Read pass, with one `now`: members = the first LIMIT (default 100) members of
`active` with a deadline <= now, then every member's row; every verdict is
reached before the first write. Verdict per member, in selection order:

- ghost (no row): `ZREM active`; listed nowhere, no row created.
- exempt (`lease_epoch` absent or not the current run_id: the lease crossed a
  restart): `ZREM active`, `state pending`, re-entry at the front of its
  band; `stalled` neither read nor written; listed as recovered.
- counted: `s = next(stalled)`; `s >= MAXSTALLED` (default the queue's
  `max_stalled`): `ZREM active`, `stalled s`, `last_error stalled`, `state
  dead`, `finished_ms`, `ZADD dead now id`, `HINCRBY metrics:failed count 1`
  (and the `dead` trim), listed as dead; else `ZREM active`, `stalled s`,
  `state pending`, re-entry, listed as recovered, and counted in
  `p.."metrics"` field `stalled` (emqd_jobs_stalled_total).

A lane job, whatever its verdict, gives its slot back, and one that re-enters
goes back to its lane (lanes.py; the seed's scripted row, counted and with the
epoch exemption: protocol section 11). A member that dies settles what it is
tied to (ties.py: a flow's parent, a unique key) in the same plan.

LIMIT above MAX_LIMIT is clamped to it (protocol section 4, "Bounded calls"):
one call judges at most MAX_LIMIT leases, about 10 ms of the loop.

Returns: `[[recovered ids...], [dead ids...]]`, each in selection order.

Errors, each refusing the whole call with nothing written: `ERR MAXSTALLED
must be a positive integer` (LIMIT the same; before anything is read);
WRONGTYPE for a member's row key that holds a sorted set (or a queue key of
the wrong type); HINCRBY's text for the `stalled` of a member to be counted; a
corrupt `priority` of a member to re-enter; a corrupt queue setting.

The server's own sweep (housekeeping, through `slice_args`) runs this planner
with `quarantine`: there a row's own corrupt field (the last two) must not stop
the recovery of every other expired lease of the queue, for as long as the row
stays corrupt, with no client to tell. That row is dead-lettered as CLAIM
dead-letters one (`last_error` the refusal's text, naming the field; counted
in `metrics:failed`; what it is tied to settled), the others are judged as
usual, and the reply gains a third list, `[[id, last_error], ...]`, for
housekeeping to count and log. What is not a row's own (a row key holding a
sorted set, a corrupt queue setting) still refuses the sweep's slice, and
housekeeping holds the queue as before.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, lanes, ties
from emqd.rules import settings as queue_settings
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"MAXSTALLED", b"LIMIT"})
DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 1000
STALLED_ERROR: Final = b"stalled"  # the `last_error` of a job the sweep dead-letters


@dataclass(frozen=True, slots=True)
class CheckArgs:
    keys: QueueKeys
    max_stalled: int | None
    limit: int
    config: Config
    quarantine: bool = False  # the server's sweep: a corrupt row dies, the call goes on


def parse(argv: list[bytes], config: Config) -> CheckArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    opts = parse_args.options(argv, 2, _KEYWORDS)
    raw_max = opts.get(b"MAXSTALLED")
    raw_limit = opts.get(b"LIMIT")
    return CheckArgs(
        keys=keys,
        max_stalled=None if raw_max is None else parse_args.positive(raw_max, "MAXSTALLED"),
        limit=DEFAULT_LIMIT if raw_limit is None
        else parse_args.positive_capped(raw_limit, "LIMIT", MAX_LIMIT),
        config=config,
    )


def slice_args(queue: bytes, limit: int, config: Config) -> CheckArgs:
    """The server's sweep: the first `limit` expired leases, with the queue's max_stalled,
    a corrupt row quarantined (`quarantine`: the module's docstring)."""
    return CheckArgs(queue_keys(queue), None, limit, config, quarantine=True)


def plan(args: CheckArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    active = view.zset(keys.active)
    settings = queue_settings.of_queue(view, keys, args.config)
    expired = [] if active is None else active.due(now_ms, args.limit)
    rows = [view.hash(keys.job(member)) for member in expired]  # every row, before judging
    max_stalled = args.max_stalled or settings.max_stalled
    recovered: list[bytes] = []
    dead: list[bytes] = []
    counted = 0
    quarantined: list[list[bytes]] = []  # [id, last_error] of the corrupt rows the sweep kills
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    end = ties.Ending(view, keys, args.config, now_ms, ledger, expired, job.DEAD, settings)
    ops = end.ops
    happened = end.happened
    for member, row in zip(expired, rows, strict=True):
        ops += job.leave_active_ops(keys, member, row, ledger)
        if row is None:
            continue  # a ghost: listed nowhere, no row created
        exempt = hashes.get(row, job.LEASE_EPOCH) != run_id  # the lease crossed a restart
        try:
            stalled = 0 if exempt else incremented(hashes.get(row, job.STALLED), 1)
        except ReplyError as error:
            if not args.quarantine:
                raise
            quarantined.append([member, error.message + b" (field 'stalled')"])
            _dead(end, member, row, quarantined[-1][1], ())
            continue
        if stalled >= max_stalled:
            dead.append(member)
            _dead(end, member, row, STALLED_ERROR, (job.STALLED, b"%d" % stalled))
            continue
        job.check_entry(view, keys, row)
        try:
            score = job.reentry_score(row)
        except ReplyError as error:  # a corrupt `priority`: the text names it
            if not args.quarantine:
                raise
            quarantined.append([member, error.message])
            _dead(end, member, row, error.message, ())
            continue
        recovered.append(member)
        if exempt:  # not counted: `stalled` neither read nor written
            ops += job.enter_ops(keys, member, row, score, ledger=ledger, ready_ms=now_ms)
            happened.append((events.RECOVERED, keys.queue, member, now_ms, None))
        else:
            ops += job.enter_ops(keys, member, row, score, job.STALLED, b"%d" % stalled,
                                 ledger=ledger, ready_ms=now_ms)
            counted += 1
            happened.append((events.STALLED, keys.queue, member, now_ms, None))
    ops = end.finish()
    if counted:
        ops.append(job.count_op(view, keys, b"stalled", by=counted))
    reply: list[Any] = [recovered, dead, quarantined] if args.quarantine else [recovered, dead]
    return Plan(ops, reply, happened, tuple(end.due))


def _dead(end: ties.Ending, member: bytes, row: Hash, error: bytes,
          fields: tuple[bytes, ...]) -> None:
    """A member dies: its row dead (`fields`, then `last_error` = `error`) and its event."""
    keys, now_ms = end.keys, end.now_ms
    end.ops.append(job.dead_row_op(keys, member, now_ms, (*fields, job.LAST_ERROR, error)))
    end.happened.append((events.DEAD, keys.queue, member, now_ms, {"error": error}))
    end.died(member, row)


COMMANDS: Final = [
    verb_command("emq.stalled.check", -2, "write", sys.modules[__name__],
                 summary="Recover or dead-letter jobs whose lease ran out")
]
