"""EMQ.FAIL queue id token [ERROR error] [MAXATTEMPTS max-attempts] [BACKOFF backoff-ms]

The holder of TOKEN reports a failure: the seed's `decide_fail`, step by
step. The guard (`job.held`), then `f = next(failures)`; the cap is
MAXATTEMPTS if given, else the row's `max_attempts`, else the queue's. The cap
is on `failures`, never on `attempts`: a job claimed, requeued and claimed
again (token 2) still has its whole retry budget.

- `f >= cap`, dead: `ZREM active`, `last_error`, `failures f`, `state dead`,
  `finished_ms`, `ZADD dead now id`, `metrics:failed count` one higher, and
  the retention trim of `dead`.
- else, retry: `ZREM active`, `last_error`, `failures f`, `state scheduled`,
  `ZADD scheduled (now + delay) id`; delay is BACKOFF if given, else the
  row's `backoff` rule, else the queue's, for failure number f.

Both give a lane job's slot back (lanes.py), and count in `p.."metrics"`:
`failed` always, `retried` for a retry. A death also settles what the job is
tied to (ties.py): a flow's child tells its parent (which may die with it,
flows.py), a unique job frees its key. `last_error` is ERROR, or
empty without it. `attempts` and `stalled` are
never written.

Returns: `["dead", f]` or `["scheduled", f]` (verdict bulk string, integer).

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; HINCRBY's
text for a corrupt `failures` (or `metrics:failed` count); `ERR MAXATTEMPTS
must be a positive integer`; `ERR BACKOFF must be a non-negative integer`; `ERR invalid BACKOFF in
'emq.fail' command` when the retry's due time is beyond 2^53 ms;
`ERR syntax error`; `ERR ERROR exceeds max-payload` for an ERROR longer than
`--max-payload` (as ADD's payload); a corrupt row setting (`max_attempts`,
`backoff`) or queue setting; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import SCHEDULED, Op, Plan, Shape, Slot
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, lanes, ties
from emqd.rules import settings as queue_settings
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"ERROR", b"MAXATTEMPTS", b"BACKOFF"})
ERROR_TOO_BIG: Final = errors.over_max_payload("ERROR")
NAME: Final = "emq.fail"

# A flat job retried: the plan of nearly every FAIL (a lane job's slot back, or a
# dead letter, takes the general path).
RETRY: Final = Shape(
    "fail retry",
    (b"ZREM", Slot("active"), Slot("id")),
    (b"HSET", Slot("row"), job.LAST_ERROR, Slot("error"), job.FAILURES, Slot("failures"),
        job.STATE, job.SCHEDULED),
    (b"ZADD", Slot("scheduled"), Slot("due"), Slot("id")),
    (b"HSET", Slot("metrics"), b"failed", Slot("failed"), b"retried", Slot("retried")),
)


class FailArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("keys", "id", "token", "error", "max_attempts", "backoff", "config")

    def __init__(
            self, keys: QueueKeys, id: bytes, token: bytes, error: bytes,
            max_attempts: int | None, backoff: int | None, config: Config) -> None:
        self.keys = keys
        self.id = id
        self.token = token
        self.error = error
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.config = config


class Dead:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("failures",)

    def __init__(self, failures: int) -> None:
        self.failures = failures


class Retry:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("failures", "due")

    def __init__(self, failures: int, due: int) -> None:
        self.failures = failures
        self.due = due


def parse(argv: list[bytes], config: Config) -> FailArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    opts = parse_args.options(argv, 4, _KEYWORDS)
    raw_max = opts.get(b"MAXATTEMPTS")
    raw_backoff = opts.get(b"BACKOFF")
    error = opts.get(b"ERROR") or b""
    if len(error) > config.max_payload:
        raise ERROR_TOO_BIG()
    return FailArgs(
        keys=keys,
        id=job_id,
        token=argv[3],
        error=error,
        max_attempts=None if raw_max is None else parse_args.positive(raw_max, "MAXATTEMPTS"),
        backoff=None if raw_backoff is None else parse_args.non_negative(raw_backoff, "BACKOFF"),
        config=config,
    )


def decide(args: FailArgs, row: Hash, failures: int, settings: queue_settings.Settings,
           now_ms: int) -> Dead | Retry:
    """The seed's decide_fail after the guard and `f = next(failures)`: the cap on f."""
    cap = args.max_attempts or job.max_attempts(row) or settings.max_attempts
    if failures >= cap:
        return Dead(failures)
    if args.backoff is not None:
        delay = args.backoff
    else:
        rule = job.backoff(row) or settings.backoff
        delay = rule.delay(failures)
    if now_ms + delay > MAX_TIME_MS:
        raise errors.invalid_time("BACKOFF", NAME)
    return Retry(failures, now_ms + delay)


def plan(args: FailArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = job.held(view, keys, args.id, args.token)
    failures = incremented(hashes.get(row, job.FAILURES), 1)  # corrupt: HINCRBY's text
    view.check_zset(keys.scheduled)  # its type, before a retry ZADDs there
    settings = queue_settings.of_queue(view, keys, args.config)
    verdict = decide(args, row, failures, settings, now_ms)
    if isinstance(verdict, Retry) and lanes.group_of(row) is None:
        return _flat_retry(args, view, verdict, b"%d" % verdict.failures, now_ms)
    return general(args, view, row, verdict, settings, now_ms)


def general(args: FailArgs, view: View, row: Hash, verdict: Dead | Retry,
            settings: queue_settings.Settings, now_ms: int) -> Plan:
    """The plan in general, through the lanes' ledger: what the RETRY Shape must plan
    alike wherever it answers (tests/verbs/test_fail.py)."""
    keys = args.keys
    written = (job.LAST_ERROR, args.error, job.FAILURES, b"%d" % verdict.failures)
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    leave = job.leave_active_ops(keys, args.id, row, ledger)
    if isinstance(verdict, Dead):
        return _dead(args, view, row, verdict, settings, ledger, [*leave, job.dead_row_op(
            keys, args.id, now_ms, written)], now_ms)
    lane_ops = lanes.settle(ledger)
    due_ms = verdict.due
    ops = [
        *leave,
        (b"HSET", keys.job(args.id), *written, job.STATE, job.SCHEDULED),
        (b"ZADD", keys.scheduled, due_ms, args.id),
        *lane_ops,
        job.count_op(view, keys, b"failed", b"retried"),
    ]
    return _retried(args, verdict, now_ms, ops)


def _dead(args: FailArgs, view: View, row: Hash, verdict: Dead,
          settings: queue_settings.Settings, ledger: lanes.Ledger, ops: list[Op],
          now_ms: int) -> Plan:
    """The job dies (`ops`: it leaves active, its dead row): counted and trimmed, with what
    it is tied to (ties.py: a flow's parent may die of it, in any queue)."""
    keys = args.keys
    end = ties.Ending(view, keys, args.config, now_ms, ledger, [args.id], job.DEAD, settings)
    end.ops += ops
    end.happened.append((events.DEAD, keys.queue, args.id, now_ms, {"error": args.error}))
    end.died(args.id, row)
    ops = [*end.finish(), job.count_op(view, keys, b"failed")]
    return Plan(ops, [job.DEAD, verdict.failures], end.happened, tuple(end.due))


def _flat_retry(args: FailArgs, view: View, verdict: Retry, failures: bytes,
                now_ms: int) -> Plan:
    """A flat job retried (nearly every FAIL): no lane slot to give back, so no
    ledger; the ops from the RETRY Shape, the same as the general path's."""
    keys = args.keys
    counted = job.count_op(view, keys, b"failed", b"retried")
    ops = RETRY.ops(keys.active, args.id, keys.job(args.id), args.error, failures,
                    keys.scheduled, b"%d" % verdict.due, keys.metrics, counted[3], counted[5])
    return _retried(args, verdict, now_ms, ops, RETRY)


def _retried(args: FailArgs, verdict: Retry, now_ms: int, ops: list[Op],
             shape: Shape | None = None) -> Plan:
    keys = args.keys
    event = (events.RETRY, keys.queue, args.id, now_ms,
             {"failures": verdict.failures, "due_ms": verdict.due})
    return Plan(ops, [job.SCHEDULED, verdict.failures], [event],
                ((SCHEDULED, keys.queue, verdict.due),), shape)


COMMANDS: Final = [
    verb_command(NAME, -4, "write fast", sys.modules[__name__],
                 summary="Report a failed job: retry later or dead-letter")
]
