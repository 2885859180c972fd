"""EMQ.PROMOTE queue [LIMIT limit | ID id]

Scheduled jobs whose due time is <= now (the first LIMIT, default 1000, in
due order) enter pending (a lane job: its lane, with the lane bookkeeping of
lanes.py) with `state pending`. With `ID id`, that one scheduled job does,
now, whatever its due time (the dashboard's "run it now"). A job never claimed
(no `attempts`: a delayed ADD) enters for the first time, at the back of its
band with a new sequence number (`priority * 2^40 + seq`, `meta.seq`
written back); a job claimed before (a FAIL's retry) re-enters at the front
of its band (`priority * 2^40`). A member whose row is gone (a ghost) is
removed from `scheduled` and not counted. Charges no counter. Housekeeping
runs this same planner at each queue's earliest due time.

LIMIT above MAX_LIMIT is clamped to it (protocol section 4, "Bounded calls"),
so one call moves at most MAX_LIMIT jobs, about 10 ms of the loop.

Returns: how many jobs entered pending (integer); with ID, 1, or 0 when the
job is not in `scheduled`.

Errors: `ERR LIMIT must be a positive integer`; `ERR syntax error` for LIMIT
with ID; `ERR invalid job id`; HINCRBY's text for a corrupt `meta.seq`; a
corrupt `priority`; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.events import Event
from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, lanes
from emqd.store import hash as hashes
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"LIMIT", b"ID"})
DEFAULT_LIMIT: Final = 1000
MAX_LIMIT: Final = 1000


@dataclass(frozen=True, slots=True)
class PromoteArgs:
    keys: QueueKeys
    limit: int
    id: bytes | None  # ID: this one scheduled job, due or not
    config: Config


def parse(argv: list[bytes], config: Config) -> PromoteArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    opts = parse_args.options(argv, 2, _KEYWORDS)
    raw_limit, raw_id = opts.get(b"LIMIT"), opts.get(b"ID")
    if raw_limit is not None and raw_id is not None:
        raise errors.SYNTAX()
    limit = DEFAULT_LIMIT if raw_limit is None else \
        parse_args.positive_capped(raw_limit, "LIMIT", MAX_LIMIT)
    return PromoteArgs(keys, limit, None if raw_id is None else parse_args.job_id(raw_id), config)


def slice_args(queue: bytes, limit: int, config: Config) -> PromoteArgs:
    """Housekeeping's slice: the first `limit` due jobs."""
    return PromoteArgs(queue_keys(queue), limit, None, config)


def plan(args: PromoteArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    scheduled = view.zset(keys.scheduled)
    meta = view.hash(keys.meta)
    if scheduled is None:
        members: list[bytes] = []
    elif args.id is None:
        members = scheduled.due(now_ms, args.limit)
    else:
        members = [args.id] if args.id in scheduled else []
    if not members:
        return Plan([], 0, None, ())
    rows = [view.hash(keys.job(member)) for member in members]
    ops: list[Op] = [(b"ZREM", keys.scheduled, *members)]
    seq_raw = None if meta is None else hashes.get(meta, b"seq")
    seq = None
    happened: list[Event] = []
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    for member, row in zip(members, rows, strict=True):
        if row is None:
            continue  # a ghost: removed from scheduled, not counted
        if hashes.has(row, job.CLAIMED_MS):  # claimed before (not `attempts`: rules/tokens.py)
            score = job.reentry_score(row)
        else:
            seq = job.next_seq(seq_raw if seq is None else b"%d" % seq, args.config)
            score = job.first_entry_score(row, seq)
        job.check_entry(view, keys, row)
        due = scheduled.score(member) if scheduled is not None else None
        ready = now_ms if due is None else min(now_ms, int(due))  # early by PROMOTE ID: now
        ops += job.enter_ops(keys, member, row, score, ledger=ledger, ready_ms=ready)
        happened.append((events.PROMOTED, keys.queue, member, now_ms, None))
    ops += lanes.settle(ledger)
    if seq is not None:
        ops.append((b"HSET", keys.meta, b"seq", b"%d" % seq))
    return Plan(ops, len(happened), happened, ())


COMMANDS: Final = [
    verb_command("emq.promote", -2, "write", sys.modules[__name__],
                 summary="Move due scheduled jobs to pending")
]
