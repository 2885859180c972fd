"""EMQ.ADD QUEUE PAYLOAD [ID id] [DELAY ms | AT unix_ms] [PRIORITY p] [MAXATTEMPTS n]
[BACKOFF rule] [GROUP g]

Creates a job. Due now (no DELAY/AT, or a due time not in the future): it
enters `pending` at `priority * 2^40 + seq` (with GROUP g: its lane
`lane:g`, with the lane bookkeeping of lanes.py); otherwise `scheduled` at
its due time. The row holds `state`, `payload`, `created_ms` and only the
options given (`group` among them). `seq` is `meta.seq + 1`; without ID
the id is that number, skipping numbers whose row a client already created.
`meta.added` counts the jobs added (the metric `emqd_jobs_added_total`).

Returns: the id (bulk string). With ID of an existing row nothing is written
and the id is returned (idempotent enqueue).

Errors: `ERR payload exceeds max-payload`; `ERR invalid queue name` / `invalid
job id`; `ERR DELAY must be a non-negative integer` (AT the same);
`ERR PRIORITY must be an integer`, `ERR PRIORITY must be between -1000 and
1000`; `ERR invalid DELAY in 'emq.add' command` when now + DELAY does not fit
in 64 bits; `ERR MAXATTEMPTS must be a
positive integer`; `ERR invalid backoff rule`; `ERR syntax error` for DELAY
with AT or a bad option; `ERR invalid group name`; a corrupt `meta.seq`
(or `meta.added`) answers HINCRBY's text (a corrupt lane counter the same). Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from typing import Any

from emqd import errors, events
from emqd.config import Config
from emqd.keys import QUEUES, QueueKeys, queue_keys
from emqd.numbers import INT64_MAX, ms_text, parse_int
from emqd.plan import SCHEDULED, Op, Plan, Shape, Slot
from emqd.store import hash as hashes
from emqd.store.hash import incremented
from emqd.store.keyspace import View
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs.backoff import parse_backoff
from emqd.verbs.job import PRIORITY_BAND
from emqd.verbs.runner import verb_command

_KEYWORDS = frozenset({b"ID", b"DELAY", b"AT", b"PRIORITY", b"MAXATTEMPTS", b"BACKOFF", b"GROUP"})
NAME = "emq.add"
SEQ = b"seq"
ADDED = b"added"  # meta field: jobs added, ever (emqd_jobs_added_total)

# A job with no options into a queue that exists and has no lanes: nearly every ADD.
PLAIN = Shape(
    "add",
    (b"HSET", Slot("row"), b"state", b"pending", b"payload", Slot("payload"),
     b"created_ms", Slot("now")),
    (b"ZADD", Slot("pending"), Slot("seq"), Slot("id")),
    (b"HSET", Slot("meta"), SEQ, Slot("seq"), ADDED, Slot("added")),
)


class AddArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/plan.py's Plan says more).
    __slots__ = ("keys", "payload", "id", "delay", "at", "priority", "max_attempts", "backoff",
                 "group", "config")

    def __init__(
            self, keys: QueueKeys, payload: bytes, id: bytes | None, delay: int | None,
            at: int | None, priority: int | None, max_attempts: int | None,
            backoff: bytes | None, group: bytes | None, config: Config) -> None:
        self.keys = keys
        self.payload = payload
        self.id = id
        self.delay = delay
        self.at = at
        self.priority = priority
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.group = group
        self.config = config


def parse(argv: list[bytes], config: Config) -> AddArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    payload = argv[2]
    if len(payload) > config.max_payload:
        raise errors.PAYLOAD_TOO_BIG()
    if len(argv) == 3:
        return AddArgs(keys, payload, None, None, None, None, None, None, None, config)
    opts = parse_args.options(argv, 3, _KEYWORDS)
    if b"DELAY" in opts and b"AT" in opts:
        raise errors.SYNTAX()
    raw_group = opts.get(b"GROUP")
    raw_id = opts.get(b"ID")
    raw_priority = opts.get(b"PRIORITY")
    priority = None
    if raw_priority is not None:
        priority = parse_int(raw_priority)
        if priority is None:
            raise errors.PRIORITY_NOT_INTEGER()
        if not -1000 <= priority <= 1000:
            raise errors.PRIORITY_RANGE()
    raw_max = opts.get(b"MAXATTEMPTS")
    raw_backoff = opts.get(b"BACKOFF")
    if raw_backoff is not None and parse_backoff(raw_backoff) is None:
        raise errors.INVALID_BACKOFF()
    raw_delay = opts.get(b"DELAY")
    raw_at = opts.get(b"AT")
    return AddArgs(
        keys=keys,
        payload=payload,
        id=None if raw_id is None else parse_args.job_id(raw_id),
        delay=None if raw_delay is None else parse_args.non_negative(raw_delay, "DELAY"),
        at=None if raw_at is None else parse_args.non_negative(raw_at, "AT"),
        priority=priority,
        max_attempts=None if raw_max is None else parse_args.positive(raw_max, "MAXATTEMPTS"),
        backoff=raw_backoff,
        group=None if raw_group is None else parse_args.group_name(raw_group),
        config=config,
    )


def _due(args: AddArgs, now_ms: int) -> int | None:
    """The due time when it is in the future (the job is scheduled), else None."""
    if args.delay is not None:
        if now_ms + args.delay > INT64_MAX:
            raise errors.invalid_time("DELAY", NAME)
        due: int | None = now_ms + args.delay
    else:
        due = args.at
    return due if due is not None and due > now_ms else None


def plan(args: AddArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    due = _due(args, now_ms)
    # The sets the plan ZADDs to are read for their type first: one holding a
    # hash refuses with WRONGTYPE here, instead of failing the plan halfway.
    meta = view.hash(keys.meta)
    queues = view.zset(QUEUES)
    view.zset(keys.scheduled if due is not None else lanes.waiting_key(keys, args.group))
    ring = view.zset(keys.ring)
    seq = job.next_seq(None if meta is None else hashes.get(meta, SEQ), args.config)
    added = incremented(None if meta is None else hashes.get(meta, ADDED), 1)
    if args.id is not None:
        job_id = args.id
        if view.type_name(keys.job(job_id)) != "none":
            return Plan([], job_id, None, ())  # idempotent: the job exists
    else:
        job_id = b"%d" % seq
        while view.type_name(keys.job(job_id)) != "none":  # a client made that row
            seq = incremented(job_id, 1)
            job_id = b"%d" % seq
    now = ms_text(now_ms)
    seq_text = job_id if args.id is None else b"%d" % seq
    new_queue = queues is None or keys.queue not in queues
    event = (events.ADDED, keys.queue, job_id, now_ms, None if due is None else {"due_ms": due})
    if (due is None and ring is None and not new_queue and args.priority is None
            and args.max_attempts is None and args.backoff is None and args.group is None):
        return Plan(PLAIN.ops(keys.job(job_id), args.payload, now, keys.pending, seq_text,
                              job_id, keys.meta, b"%d" % added), job_id, [event], (), PLAIN)
    row: list[Any] = [b"HSET", keys.job(job_id), b"state", b"scheduled" if due is not None else
                 b"pending", b"payload", args.payload, b"created_ms", now]
    if args.priority is not None:
        row += [b"priority", b"%d" % args.priority]
    if args.max_attempts is not None:
        row += [b"max_attempts", b"%d" % args.max_attempts]
    if args.backoff is not None:
        row += [b"backoff", args.backoff]
    if args.group is not None:
        row += [lanes.GROUP, args.group]
    ops: list[Op] = [tuple(row)]
    if due is not None:
        ops.append((b"ZADD", keys.scheduled, due, job_id))
        lane_ops = []
    else:
        score = (args.priority or 0) * PRIORITY_BAND + seq
        ops.append((b"ZADD", lanes.waiting_key(keys, args.group), score, job_id))
        ledger = lanes.Ledger(view, keys, args.config)
        ledger.enter(args.group)
        lane_ops = lanes.settle(ledger)
    ops.append((b"HSET", keys.meta, SEQ, seq_text, ADDED, b"%d" % added))
    ops += lane_ops
    if new_queue:
        ops.append((b"ZADD", QUEUES, now_ms, keys.queue))
    return Plan(ops, job_id, [event], () if due is None else ((SCHEDULED, keys.queue, due),))


COMMANDS = [
    verb_command(NAME, -3, "write denyoom fast", sys.modules[__name__], summary="Create a job")
]
