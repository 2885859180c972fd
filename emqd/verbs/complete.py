"""EMQ.COMPLETE QUEUE ID TOKEN [RESULT bytes]

The holder of TOKEN finishes the job. Plan: `ZREM active`, `state
completed`, `finished_ms`, `result` if given, `ZADD completed now id`,
`HINCRBY metrics:completed count 1`, the retention trim of `completed`
(at most 100 of its oldest rows beyond `keep_completed`, see retention.py),
and for a lane job its slot back (lanes.py).

Returns: `OK`.

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active` (job.held);
`ERR syntax error` for an unknown or repeated option; HINCRBY's text for a
corrupt `metrics:completed` count; a corrupt queue setting; WRONGTYPE.
Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import Need, Reads, need, verb_command

_KEYWORDS = frozenset({b"RESULT"})


@dataclass(slots=True)  # not frozen: see runner.Need
class CompleteArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    result: bytes | None
    config: Config


@dataclass(slots=True)  # not frozen: see runner.Need
class Completed:
    """The verdict: leaving `active`, and the finishing ops (set entry, metric, trim, lane)."""

    leave: list[Op]
    tail: list[Op]


def parse(argv: list[bytes], config: Config) -> CompleteArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    opts = parse_args.options(argv, 4, _KEYWORDS)
    return CompleteArgs(keys, parse_args.job_id(argv[2]), argv[3], opts.get(b"RESULT"), config)


def decide(args: CompleteArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    # Every round re-runs this function from the top: a COMPLETE that passes
    # the guard needs the settings and the finishing reads too, so they are
    # asked for with the guard's reads (2 rounds instead of 6).
    ahead = (queue_settings.settings_read(keys.config), *job.finish_reads(keys, job.COMPLETED))
    row = job.held(keys, args.id, args.token, reads, ahead)
    if type(row) is Need:
        return row
    settings = queue_settings.from_reads(keys.config, reads, args.config)
    if settings is None:
        return need(queue_settings.settings_read(keys.config))
    tail = job.finish_ops(keys, job.COMPLETED, [args.id], now_ms, settings.keep_completed, reads)
    if type(tail) is Need:
        return lanes.also(tail, keys, row)  # type: ignore[arg-type]
    ledger = lanes.Ledger(keys, args.config)
    leave = job.leave_active_ops(keys, args.id, row, ledger)  # type: ignore[arg-type]
    lane_ops = lanes.settle(ledger, reads)
    if type(lane_ops) is Need:
        return lane_ops
    return Completed(leave, [*tail, *lane_ops])  # type: ignore[misc]


def plan(args: CompleteArgs, verdict: Completed, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    fields: list = [job.STATE, job.COMPLETED, job.FINISHED_MS, b"%d" % now_ms]
    if args.result is not None:
        fields += [b"result", args.result]
    return Plan(
        [
            *verdict.leave,
            (b"HSET", keys.job(args.id), *fields),
            *verdict.tail,
        ],
        "OK",
    )


COMMANDS = [
    verb_command("emq.complete", -4, "write fast", sys.modules[__name__],
                 summary="Finish a claimed job")
]
