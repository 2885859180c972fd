"""EMQ.ADD queue payload [ID id] [DELAY delay-ms | AT unix-time-ms] [PRIORITY priority]
[MAXATTEMPTS max-attempts] [BACKOFF backoff-rule] [GROUP group] [TRACE trace-context]
[UNIQUE key [TTL ttl-ms] [REPLACE] [EXTEND]]

Creates a job. Due now (no DELAY/AT, or a due time not in the future): it
enters `pending` at `priority * 2^40 + seq` (with GROUP g: its lane
`lane:g`, with the lane bookkeeping of lanes.py); otherwise `scheduled` at
its due time. The row holds `state`, `payload`, `created_ms` and only the
options given (`group` among them). `seq` is `meta.seq + 1`; without ID
the id is that number, skipping numbers whose row a client already created.
`meta.added` counts the jobs added (the metric `emqd_jobs_added_total`).
TRACE keeps the producer's trace context (a W3C `traceparent`, up to 4096
bytes, opaque to the server) in the row's `trace`, for CLAIM ... WITHTRACE.

With UNIQUE key: while a job added with that key is live (pending,
scheduled, active or waiting), or with TTL until the time has passed
(unique.py), nothing is added and that job's id is answered; otherwise the
new job holds the key (`unique` in its row, `p.."unique"`). With REPLACE and/or
EXTEND, a holder that is still waiting (pending or scheduled) is changed instead
(debounce.py): REPLACE gives it this add's payload and options, EXTEND restarts
its due time (and its TTL hold) as this add's.

Returns: the id (bulk string). With ID of an existing row nothing is written
and the id is returned (idempotent enqueue). With UNIQUE the reply is always
`[id, verdict]` (the shape follows the arguments, as CLAIM's COUNT does):
`added`; `exists` for the id of the live job holding the key, or of the
existing row ID named; `replaced` (REPLACE) or `extended` (EXTEND alone) for the
waiting holder it changed.

Errors: `ERR payload exceeds max-payload`; `ERR TRACE exceeds 4096 bytes`;
`ERR invalid queue name` / `invalid job id`; `ERR DELAY must be a non-negative
integer` (AT the same); `ERR PRIORITY must be an integer`, `ERR PRIORITY must
be between -1000 and 1000`; `ERR invalid DELAY in 'emq.add' command` when now +
DELAY is beyond 2^53 ms, the last a score holds exactly (AT, and TTL, the
same); `ERR MAXATTEMPTS must be a positive integer`; `ERR invalid backoff rule`;
`ERR syntax error` for DELAY with AT, TTL, REPLACE or EXTEND without UNIQUE, or
a bad option; `ERR invalid group name`; `ERR invalid unique key` (1..256
bytes); `ERR TTL must be a positive integer`; a corrupt `meta.seq` (or
`meta.added`) answers HINCRBY's text (a corrupt lane counter the same). Every
refusal writes nothing.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import BIG_VALUE, Plan, Shape, Slot
from emqd.compat.numbers import MAX_TIME_MS, ms_text, parse_int
from emqd.config import Config
from emqd.layout import QUEUES, QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import debounce, enqueue, job, lanes, unique
from emqd.rules.backoff import parse_backoff
from emqd.rules.job_log import MAX_LINE
from emqd.store import hash as hashes
from emqd.store.hash import incremented
from emqd.store.keyspace import View

OPTIONS: Final = frozenset({b"ID", b"DELAY", b"AT", b"PRIORITY", b"MAXATTEMPTS", b"BACKOFF",
                     b"GROUP", b"TRACE"})
TRACE_TOO_LONG: Final = errors.too_long("TRACE", MAX_LINE)
_KEYWORDS: Final = OPTIONS | {b"UNIQUE", b"TTL"}
_FLAGS: Final = frozenset({b"REPLACE", b"EXTEND"})  # UNIQUE's debounce (debounce.py)
NAME: Final = "emq.add"
SEQ: Final = enqueue.SEQ
ADDED: Final = enqueue.ADDED
EXISTS: Final = b"exists"  # UNIQUE's verdict words
NEW: Final = b"added"

# A job with no options into a queue that exists and has no lanes: nearly every ADD.
PLAIN: Final = Shape(
    "add",
    (b"HSET", Slot("row"), b"state", b"pending", b"payload", Slot("payload"),
     b"created_ms", Slot("now")),
    (b"ZADD", Slot("pending"), Slot("seq"), Slot("id")),
    (b"HSET", Slot("meta"), SEQ, Slot("seq"), ADDED, Slot("added")),
)


class AddArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("keys", "payload", "id", "delay", "at", "priority", "max_attempts", "backoff",
                 "group", "config", "unique", "ttl", "replace", "extend", "trace")

    def __init__(
            self, keys: QueueKeys, payload: bytes, id: bytes | None, delay: int | None,
            at: int | None, priority: int | None, max_attempts: int | None,
            backoff: bytes | None, group: bytes | None, config: Config,
            unique: bytes | None = None, ttl: int | None = None) -> None:
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
        self.unique = unique
        self.ttl = ttl
        self.replace = False  # REPLACE: a waiting holder takes this add's payload and options
        self.trace: bytes | None = None  # TRACE: the producer's trace context
        self.extend = False  # EXTEND: a waiting holder's due time restarts as this add's

    def new_job(self) -> enqueue.NewJob:
        return enqueue.NewJob(self.payload, self.priority, self.max_attempts, self.backoff,
                              self.group, trace=self.trace)


def parse(argv: list[bytes], config: Config) -> AddArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    payload = argv[2]
    if len(payload) > config.max_payload:
        raise errors.PAYLOAD_TOO_BIG()
    if len(argv) == 3:
        return AddArgs(keys, payload, None, None, None, None, None, None, None, config)
    opts = parse_args.options(argv, 3, _KEYWORDS, _FLAGS)
    args = parse_options(keys, payload, opts, config)
    raw_unique, raw_ttl = opts.get(b"UNIQUE"), opts.get(b"TTL")
    if raw_unique is None and (raw_ttl is not None or b"REPLACE" in opts or b"EXTEND" in opts):
        raise errors.SYNTAX()
    if raw_unique is not None:
        if not raw_unique or len(raw_unique) > parse_args.NAME_MAX:
            raise errors.INVALID_UNIQUE_KEY()
        args.unique = raw_unique
        args.ttl = None if raw_ttl is None else parse_args.positive(raw_ttl, "TTL")
        args.replace = b"REPLACE" in opts
        args.extend = b"EXTEND" in opts
    return args


def parse_options(keys: QueueKeys, payload: bytes, opts: dict[bytes, bytes | None],
                  config: Config) -> AddArgs:
    """ADD's own options (OPTIONS), checked: FLOW's jobs take the same."""
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
    raw_trace = opts.get(b"TRACE")
    if raw_trace is not None and len(raw_trace) > MAX_LINE:
        raise TRACE_TOO_LONG()
    args = AddArgs(
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
    args.trace = raw_trace
    return args


def due_time(args: AddArgs, now_ms: int) -> int | None:
    """The due time when it is in the future (the job is scheduled), else None."""
    if args.delay is not None:
        if now_ms + args.delay > MAX_TIME_MS:
            raise errors.invalid_time("DELAY", NAME)
        due: int | None = now_ms + args.delay
    else:
        due = args.at
        if due is not None and due > MAX_TIME_MS:
            raise errors.invalid_time("AT", NAME)
    return due if due is not None and due > now_ms else None


def plan(args: AddArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    due = due_time(args, now_ms)
    if args.unique is not None:
        return _unique(args, view, now_ms, due)
    # The sets the plan ZADDs to are read for their type first: one holding a
    # hash refuses with WRONGTYPE here, instead of failing the plan halfway.
    meta = view.hash(keys.meta)
    queues = view.zset(QUEUES)
    view.check_zset(keys.scheduled if due is not None else lanes.waiting_key(keys, args.group))
    ring = view.zset(keys.ring)
    if args.id is not None and view.type_name(keys.job(args.id)) != "none":
        return Plan([], args.id, None, ())  # idempotent: the job exists
    if (due is not None or ring is not None or args.id is not None or args.priority is not None
            or args.max_attempts is not None or args.backoff is not None
            or args.group is not None or args.trace is not None or queues is None
            or keys.queue not in queues
            or len(args.payload) >= BIG_VALUE):  # a big payload is logged uncopied
        return general(args, view, now_ms, due)
    seq = job.next_seq(None if meta is None else hashes.get(meta, SEQ), args.config)
    added = incremented(None if meta is None else hashes.get(meta, ADDED), 1)
    job_id = b"%d" % seq
    while view.type_name(keys.job(job_id)) != "none":  # a client made that row
        seq = incremented(job_id, 1)
        job_id = b"%d" % seq
    event = (events.ADDED, keys.queue, job_id, now_ms, None)
    return Plan(PLAIN.ops(keys.job(job_id), args.payload, ms_text(now_ms), keys.pending, job_id,
                          job_id, keys.meta, b"%d" % added), job_id, [event], (), PLAIN)


def general(args: AddArgs, view: View, now_ms: int, due: int | None) -> Plan:
    """The plan in general, through enqueue's rule: what the PLAIN Shape must plan alike
    wherever it answers (tests/verbs/test_add.py)."""
    new = enqueue.Enqueue(view, args.config, now_ms)
    job_id = new.add(args.keys, args.new_job(), args.id, due)
    return Plan(new.ops(), job_id, new.events, tuple(new.due))


def _unique(args: AddArgs, view: View, now_ms: int, due: int | None) -> Plan:
    """ADD with UNIQUE: the live job holding the key, or a new job that holds it."""
    keys = args.keys
    key = args.unique
    assert key is not None
    if args.id is not None and view.type_name(keys.job(args.id)) != "none":
        return Plan([], [args.id, EXISTS], None, ())
    owner = unique.holder(view, keys, key, now_ms)
    if owner is not None:
        waiting = None if not (args.replace or args.extend) else debounce.waiting(view, keys,
                                                                                  owner)
        if waiting is None:
            return Plan([], [owner, EXISTS], None, ())
        asked = debounce.Change(args.new_job() if args.replace else None, args.extend, due,
                                _until(args, now_ms) if args.extend else None)
        done = debounce.change(view, keys, args.config, now_ms, owner, waiting, asked)
        verdict = debounce.REPLACED if args.replace else debounce.EXTENDED
        return Plan(done.ops, [owner, verdict], done.events, tuple(done.due))
    until = _until(args, now_ms)
    job = args.new_job()
    job.fields += [unique.UNIQUE, key]
    if until is not None:
        job.fields += [unique.UNTIL, b"%d" % until]
    new = enqueue.Enqueue(view, args.config, now_ms)
    created = new.add(keys, job, args.id, due)
    ops = [*new.ops(), *unique.take_ops(view, keys, key, created, until, now_ms)]
    return Plan(ops, [created, NEW], new.events, tuple(new.due))


def _until(args: AddArgs, now_ms: int) -> int | None:
    """When this add's TTL hold ends (None: no TTL)."""
    if args.ttl is None:
        return None
    if now_ms + args.ttl > MAX_TIME_MS:
        raise errors.invalid_time("TTL", NAME)
    return now_ms + args.ttl


COMMANDS: Final = [
    verb_command(NAME, -3, "write denyoom fast", sys.modules[__name__], summary="Create a job")
]
