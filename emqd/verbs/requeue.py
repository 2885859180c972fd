"""EMQ.REQUEUE queue id token [DELAY delay-ms]

The holder gives the job back without failing it. The plan for a flat job is
exactly three writes: `ZREM active`, `HSET state pending ready_ms <now>` (its
next claim's wait counts from now), `ZADD pending <re-entry score> id` (the
front of its priority band, `priority * 2^40`). A lane job's ZADD goes to its
lane, and its slot is given back (lanes.py). No counter, no `last_error`, no
`metrics:*` write: the job keeps its whole retry budget, and the next CLAIM's
token is one higher, so this holder's token is stale.

With DELAY ms above 0, a snooze (River's JobSnooze, Oban's `{:snooze, s}`): the
job waits in `scheduled` until now + DELAY instead (`state scheduled`, `ZADD
scheduled`), and promotion puts it back at the front of its band then, as it
does a retry. It spends neither a failure nor a stall: `failures` and `stalled`
are not written, only `attempts` rises, at the next claim. DELAY 0 is the plain
requeue.

Returns: `OK`.

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`;
`EMQCANCELLED ...` for a job cancelled while this token held it; `ERR DELAY must
be a non-negative integer`; `ERR invalid DELAY in 'emq.requeue' command` when
the due time is beyond 2^53 ms; `ERR syntax error`; a corrupt row `priority`;
WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.events import Event
from emqd.commit.plan import SCHEDULED, Due, Op, Plan
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, lanes
from emqd.store.keyspace import View

NAME: Final = "emq.requeue"
_KEYWORDS: Final = frozenset({b"DELAY"})


@dataclass(slots=True)
class RequeueArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    config: Config
    delay: int = 0  # DELAY: a snooze of that many ms (0: back to pending now)


def parse(argv: list[bytes], config: Config) -> RequeueArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    delay = 0
    if len(argv) > 4:
        raw = parse_args.options(argv, 4, _KEYWORDS).get(b"DELAY")
        delay = 0 if raw is None else parse_args.non_negative(raw, "DELAY")
    return RequeueArgs(keys, job_id, argv[3], config, delay)


def plan(args: RequeueArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = job.held(view, keys, args.id, args.token)
    if args.delay:
        due_ms = now_ms + args.delay
        if due_ms > MAX_TIME_MS:
            raise errors.invalid_time("DELAY", NAME)
        view.check_zset(keys.scheduled)  # its type, before the plan ZADDs there
    else:
        job.check_entry(view, keys, row)
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    ops: list[Op] = job.leave_active_ops(keys, args.id, row, ledger)
    due: tuple[Due, ...] = ()
    event: Event
    if args.delay:
        ops += [(b"HSET", keys.job(args.id), job.STATE, job.SCHEDULED),
                (b"ZADD", keys.scheduled, due_ms, args.id)]
        event = (events.SNOOZED, keys.queue, args.id, now_ms, {"due_ms": due_ms})
        due = ((SCHEDULED, keys.queue, due_ms),)
    else:
        ops += job.enter_ops(keys, args.id, row, job.reentry_score(row), ledger=ledger,
                             ready_ms=now_ms)
        event = (events.RECOVERED, keys.queue, args.id, now_ms, None)
    ops += lanes.settle(ledger)
    return Plan(ops, "OK", [event], due)


COMMANDS: Final = [
    verb_command(NAME, -4, "write fast", sys.modules[__name__],
                 summary="Give a claimed job back without failing it, now or after a delay")
]
