"""EMQ.FAIL QUEUE ID TOKEN [ERROR text] [MAXATTEMPTS n] [BACKOFF ms]

The holder of TOKEN reports a failure: the seed's `decide_fail`, step by
step. The guard (`job.held`), then `f = next(failures)`; the cap is
MAXATTEMPTS if given, else the row's `max_attempts`, else the queue's. The cap
is on `failures`, never on `attempts`: a job claimed, requeued and claimed
again (token 2) still has its whole retry budget.

- `f >= cap`, dead: `ZREM active`, `last_error`, `failures f`, `state dead`,
  `finished_ms`, `ZADD dead now id`, `HINCRBY metrics:failed count 1`, and
  the retention trim of `dead`.
- else, retry: `ZREM active`, `last_error`, `failures f`, `state scheduled`,
  `ZADD scheduled (now + delay) id`; delay is BACKOFF if given, else the
  row's `backoff` rule, else the queue's, for failure number f.

Both give a lane job's slot back (lanes.py). `last_error` is ERROR, or
empty without it. `attempts` and `stalled` are
never written.

Returns: `["dead", f]` or `["scheduled", f]` (verdict bulk string, integer).

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; HINCRBY's
text for a corrupt `failures` (or `metrics:failed` count); `ERR MAXATTEMPTS
must be a positive integer`; `ERR BACKOFF must be a non-negative integer`;
`ERR syntax error`; a corrupt row setting (`max_attempts`, `backoff`) or
queue setting; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.store.hash import incremented
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import ZCARD, Need, Reads, need, verb_command

_KEYWORDS = frozenset({b"ERROR", b"MAXATTEMPTS", b"BACKOFF"})


@dataclass(slots=True)  # not frozen: see runner.Need
class FailArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    error: bytes
    max_attempts: int | None
    backoff: int | None
    config: Config


@dataclass(slots=True)  # not frozen: see runner.Need
class Dead:
    failures: int
    leave: list[Op]  # ZREM active
    tail: list[Op]  # ZADD dead, the metric, the trim, the lane slot


@dataclass(slots=True)  # not frozen: see runner.Need
class Retry:
    failures: int
    leave: list[Op]  # ZREM active
    due: int
    lane_ops: list[Op]  # the lane slot


def parse(argv: list[bytes], config: Config) -> FailArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    opts = parse_args.options(argv, 4, _KEYWORDS)
    raw_max = opts.get(b"MAXATTEMPTS")
    raw_backoff = opts.get(b"BACKOFF")
    return FailArgs(
        keys=keys,
        id=job_id,
        token=argv[3],
        error=opts.get(b"ERROR") or b"",
        max_attempts=None if raw_max is None else parse_args.positive(raw_max, "MAXATTEMPTS"),
        backoff=None if raw_backoff is None else parse_args.non_negative(raw_backoff, "BACKOFF"),
        config=config,
    )


def decide(args: FailArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    row = job.held(keys, args.id, args.token, reads)
    if type(row) is Need:
        return row
    failures = incremented(row.get(job.FAILURES), 1)  # type: ignore[union-attr]
    settings = queue_settings.from_reads(keys.config, reads, args.config)
    if settings is None:
        return need(queue_settings.settings_read(keys.config), (ZCARD, keys.scheduled),
                    ahead=lanes.prefetch(keys, row))  # type: ignore[arg-type]
    cap = args.max_attempts or job.max_attempts(row) or settings.max_attempts  # type: ignore[arg-type]
    ledger = lanes.Ledger(keys, args.config)
    leave = job.leave_active_ops(keys, args.id, row, ledger)  # type: ignore[arg-type]
    lane_ops = lanes.settle(ledger, reads)
    if type(lane_ops) is Need:
        return lane_ops
    if failures >= cap:
        tail = job.finish_ops(keys, job.DEAD, [args.id], now_ms, settings.keep_dead, reads)
        if type(tail) is Need:
            return tail
        return Dead(failures, leave, [*tail, *lane_ops])  # type: ignore[misc]
    if args.backoff is not None:
        delay = args.backoff
    else:
        rule = job.backoff(row) or settings.backoff  # type: ignore[arg-type]
        delay = rule.delay(failures)
    return Retry(failures, leave, now_ms + delay, lane_ops)  # type: ignore[arg-type]


def plan(args: FailArgs, verdict: Dead | Retry, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    leave = verdict.leave
    written = (job.LAST_ERROR, args.error, job.FAILURES, b"%d" % verdict.failures)
    if type(verdict) is Dead:
        ops = [*leave, job.dead_row_op(keys, args.id, now_ms, *written), *verdict.tail]
        return Plan(ops, [job.DEAD, verdict.failures])
    ops = [
        *leave,
        (b"HSET", keys.job(args.id), *written, job.STATE, job.SCHEDULED),
        (b"ZADD", keys.scheduled, verdict.due, args.id),  # type: ignore[union-attr]
        *verdict.lane_ops,  # type: ignore[union-attr]
    ]
    return Plan(ops, [job.SCHEDULED, verdict.failures])


COMMANDS = [
    verb_command("emq.fail", -4, "write fast", sys.modules[__name__],
                 summary="Report a failed job: retry later or dead-letter")
]
