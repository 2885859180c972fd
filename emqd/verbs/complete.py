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

from emqd import events
from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.numbers import parse_int
from emqd.plan import Plan, Shape, Slot
from emqd.store import hash as hashes
from emqd.store.keyspace import View
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import verb_command

_KEYWORDS = frozenset({b"RESULT"})


def _shape(name: str, result: bool, trim: bool) -> Shape:
    """A flat job's COMPLETE, with or without RESULT, with or without one row trimmed."""
    row: tuple[Any, ...] = (b"HSET", Slot("row"), job.STATE, job.COMPLETED, job.FINISHED_MS,
                            Slot("now"))
    if result:
        row += (b"result", Slot("result"))
    ops: list[tuple[Any, ...]] = [
        (b"ZREM", Slot("active"), Slot("id")),
        row,
        (b"ZADD", Slot("completed"), Slot("now"), Slot("id")),
        (b"HINCRBY", Slot("metric"), b"count", b"1"),
    ]
    if trim:
        ops += [(b"ZREM", Slot("completed"), Slot("victim")), (b"DEL", Slot("victim_row"))]
    return Shape(name, *ops)


# (result given, one row trimmed) -> the shape: the plans of nearly every COMPLETE.
SHAPES = {(result, trim): _shape(f"complete result={result} trim={trim}", result, trim)
          for result in (False, True) for trim in (False, True)}


@dataclass(slots=True)
class CompleteArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    result: bytes | None
    config: Config


def parse(argv: list[bytes], config: Config) -> CompleteArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    result = None
    if len(argv) > 4:
        result = parse_args.options(argv, 4, _KEYWORDS).get(b"RESULT")
    return CompleteArgs(keys, parse_args.job_id(argv[2]), argv[3], result, config)


def plan(args: CompleteArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = job.held(view, keys, args.id, args.token)
    settings = queue_settings.of_queue(view, keys, args.config)
    tail = job.finish_ops(view, keys, job.COMPLETED, [args.id], now_ms, settings.keep_completed)
    ledger = lanes.Ledger(view, keys, args.config)
    leave = job.leave_active_ops(keys, args.id, row, ledger)
    lane_ops = lanes.settle(ledger)
    claimed = parse_int(hashes.get(row, job.CLAIMED_MS) or b"")
    event = (events.COMPLETED, keys.queue, args.id, now_ms,
             {"duration_ms": now_ms - claimed if claimed is not None else 0})
    now = b"%d" % now_ms
    # exactly one oldest row trimmed, without a log of its own (job_log.py)
    trim = len(tail) == 4 and len(tail[2]) == 3 and len(tail[3]) == 2
    if not lane_ops and (len(tail) == 2 or trim):
        shape = SHAPES[(args.result is not None, trim)]
        values = [keys.active, args.id, keys.job(args.id), now]
        if args.result is not None:
            values.append(args.result)
        values += [keys.completed, keys.metrics_completed]
        if trim:
            values += [tail[2][2], tail[3][1]]
        return Plan(shape.ops(*values), "OK", [event], (), shape)
    fields: list[Any] = [job.STATE, job.COMPLETED, job.FINISHED_MS, now]
    if args.result is not None:
        fields += [b"result", args.result]
    ops = [*leave, (b"HSET", keys.job(args.id), *fields), *tail, *lane_ops]
    return Plan(ops, "OK", [event], ())


COMMANDS = [
    verb_command("emq.complete", -4, "write fast", sys.modules[__name__],
                 summary="Finish a claimed job")
]
