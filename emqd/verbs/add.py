"""EMQ.ADD QUEUE PAYLOAD [ID id] [DELAY ms | AT unix_ms] [PRIORITY p] [MAXATTEMPTS n]
[BACKOFF rule] [GROUP g]

Creates a job. Due now (no DELAY/AT, or a due time not in the future): it
enters `pending` at `priority * 2^40 + seq` (with GROUP g: its lane
`lane:g`, with the lane bookkeeping of lanes.py); otherwise `scheduled` at
its due time. The row holds `state`, `payload`, `created_ms` and only the
options given (`group` among them). `seq` is `meta.seq + 1`; without ID
the id is that number, skipping numbers whose row a client already created.

Returns: the id (bulk string). With ID of an existing row nothing is written
and the id is returned (idempotent enqueue).

Errors: `ERR payload exceeds max-payload`; `ERR invalid queue name` / `invalid
job id`; `ERR DELAY must be a non-negative integer` (AT the same);
`ERR PRIORITY must be between -1000 and 1000`; `ERR MAXATTEMPTS must be a
positive integer`; `ERR invalid backoff rule`; `ERR syntax error` for DELAY
with AT or a bad option; `ERR invalid group name`; a corrupt `meta.seq`
answers HINCRBY's text (a corrupt lane counter the same). Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd import errors
from emqd.config import Config
from emqd.keys import QUEUES, QueueKeys, queue_keys
from emqd.numbers import parse_int
from emqd.plan import Plan
from emqd.store.hash import incremented
from emqd.verbs import args as parse_args
from emqd.verbs import lanes
from emqd.verbs.backoff import parse_backoff
from emqd.verbs.job import PRIORITY_BAND
from emqd.verbs.runner import HGET, TYPE, ZCARD, ZSCORE, Need, Reads, need, verb_command

_KEYWORDS = frozenset({b"ID", b"DELAY", b"AT", b"PRIORITY", b"MAXATTEMPTS", b"BACKOFF", b"GROUP"})


@dataclass(slots=True)  # not frozen: see runner.Need
class AddArgs:
    keys: QueueKeys
    payload: bytes
    id: bytes | None
    delay: int | None
    at: int | None
    priority: int | None
    max_attempts: int | None
    backoff: bytes | None
    group: bytes | None
    config: Config


@dataclass(slots=True)  # not frozen: see runner.Need
class Added:
    """The verdict: a new job `id` with sequence number `seq`; `new_queue` if first.

    `due` is its due time when it waits in `scheduled` (None: it waits now);
    `lane_ops` the lane bookkeeping of a job entering its lane.
    """

    id: bytes
    seq: int
    new_queue: bool
    due: int | None
    lane_ops: list


@dataclass(slots=True)  # not frozen: see runner.Need
class Exists:
    id: bytes


def parse(argv: list[bytes], config: Config) -> AddArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    payload = argv[2]
    if len(payload) > config.max_payload:
        raise errors.PAYLOAD_TOO_BIG()
    opts = parse_args.options(argv, 3, _KEYWORDS)
    if b"DELAY" in opts and b"AT" in opts:
        raise errors.SYNTAX()
    raw_group = opts.get(b"GROUP")
    raw_id = opts.get(b"ID")
    raw_priority = opts.get(b"PRIORITY")
    priority = None
    if raw_priority is not None:
        priority = parse_int(raw_priority)
        if priority is None or not -1000 <= priority <= 1000:
            raise errors.PRIORITY_RANGE()
    raw_max = opts.get(b"MAXATTEMPTS")
    raw_backoff = opts.get(b"BACKOFF")
    if raw_backoff is not None and parse_backoff(raw_backoff) is None:
        raise errors.INVALID_BACKOFF()
    return AddArgs(
        keys=keys,
        payload=payload,
        id=None if raw_id is None else parse_args.job_id(raw_id),
        delay=None if b"DELAY" not in opts else parse_args.non_negative(opts[b"DELAY"], "DELAY"),  # type: ignore[arg-type]
        at=None if b"AT" not in opts else parse_args.non_negative(opts[b"AT"], "AT"),  # type: ignore[arg-type]
        priority=priority,
        max_attempts=None if raw_max is None else parse_args.positive(raw_max, "MAXATTEMPTS"),
        backoff=raw_backoff,
        group=None if raw_group is None else parse_args.group_name(raw_group),
        config=config,
    )


def decide(args: AddArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    seq_read = (HGET, keys.meta, b"seq")
    queue_read = (ZSCORE, QUEUES, keys.queue)
    if seq_read not in reads:
        # The set the plan ZADDs to is read too: one holding a hash refuses with
        # WRONGTYPE here, instead of failing the plan halfway in `apply`; and the
        # ring's size, what a flat job's lane settle asks first.
        return need(seq_read, queue_read, (ZCARD, _target(args, now_ms)), (ZCARD, keys.ring),
                    ahead=lanes.prefetch_group(keys, args.group))
    seq = incremented(reads[seq_read], 1)  # a corrupt seq refuses with HINCRBY's text
    if args.id is not None:
        exists_read = (TYPE, keys.job(args.id))
        if exists_read not in reads:
            return need(exists_read)
        if reads[exists_read] != "none":
            return Exists(args.id)
        return _added(args, args.id, seq, reads, now_ms)
    while True:  # the first sequence number whose row no client has created
        candidate = (TYPE, keys.job(b"%d" % seq))
        if candidate not in reads:
            return need(candidate)
        if reads[candidate] == "none":
            return _added(args, b"%d" % seq, seq, reads, now_ms)
        seq = incremented(b"%d" % seq, 1)


def _due(args: AddArgs, now_ms: int) -> int | None:
    """The due time when it is in the future (the job is scheduled), else None."""
    due = now_ms + args.delay if args.delay is not None else args.at
    return due if due is not None and due > now_ms else None


def _target(args: AddArgs, now_ms: int) -> bytes:
    if _due(args, now_ms) is not None:
        return args.keys.scheduled
    return lanes.waiting_key(args.keys, args.group)


def _added(args: AddArgs, job_id: bytes, seq: int, reads: Reads, now_ms: int) -> Any:
    due = _due(args, now_ms)
    new_queue = reads[(ZSCORE, QUEUES, args.keys.queue)] is None
    if due is not None:
        return Added(job_id, seq, new_queue, due, [])
    ledger = lanes.Ledger(args.keys, args.config)
    ledger.enter(args.group)
    lane_ops = lanes.settle(ledger, reads)
    if type(lane_ops) is Need:
        return lane_ops
    return Added(job_id, seq, new_queue, None, lane_ops)  # type: ignore[arg-type]


def plan(args: AddArgs, verdict: Added | Exists, now_ms: int, run_id: bytes) -> Plan:
    if type(verdict) is Exists:
        return Plan([], verdict.id)
    keys = args.keys
    scheduled = verdict.due is not None
    row = [
        b"HSET",
        keys.job(verdict.id),
        b"state",
        b"scheduled" if scheduled else b"pending",
        b"payload",
        args.payload,
        b"created_ms",
        b"%d" % now_ms,
    ]
    if args.priority is not None:
        row += [b"priority", b"%d" % args.priority]
    if args.max_attempts is not None:
        row += [b"max_attempts", b"%d" % args.max_attempts]
    if args.backoff is not None:
        row += [b"backoff", args.backoff]
    if args.group is not None:
        row += [lanes.GROUP, args.group]
    ops: list[tuple] = [tuple(row)]
    if scheduled:
        ops.append((b"ZADD", keys.scheduled, verdict.due, verdict.id))
    else:
        score = (args.priority or 0) * PRIORITY_BAND + verdict.seq
        ops.append((b"ZADD", lanes.waiting_key(keys, args.group), score, verdict.id))
    ops.append((b"HSET", keys.meta, b"seq", b"%d" % verdict.seq))
    ops += verdict.lane_ops
    if verdict.new_queue:
        ops.append((b"ZADD", QUEUES, now_ms, keys.queue))
    return Plan(ops, verdict.id)


COMMANDS = [
    verb_command("emq.add", -3, "write denyoom fast", sys.modules[__name__], summary="Create a job")
]
