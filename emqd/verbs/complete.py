"""EMQ.COMPLETE queue id token [RESULT result]

The holder of TOKEN finishes the job. Plan: `ZREM active`, `state
completed`, `finished_ms`, `result` if given, `ZADD completed now id`,
`metrics:completed count` one higher, the retention trim of `completed`
(at most 100 of its oldest rows beyond `keep_completed`, or finished more
than `keep_completed_ms` ago, see retention.py), and for a lane job its slot
back (lanes.py). A job tied to others (ties.py) also settles them in the same
plan: a flow's child its parent (which enters pending when it was the last,
flows.py), a parent its record, a unique job its key (unique.py).

Returns: `OK`.

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active` (job.held);
`ERR syntax error` for an unknown or repeated option; `ERR RESULT exceeds
max-payload` for a RESULT longer than `--max-payload` (as ADD's payload); HINCRBY's text for a
corrupt `metrics:completed` count; a corrupt queue setting; WRONGTYPE.
Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import BIG_VALUE, Op, Plan, Shape, Slot
from emqd.compat.numbers import ms_text, parse_int
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, lanes, retention, ties
from emqd.rules import settings as queue_settings
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"RESULT"})
RESULT_TOO_BIG: Final = errors.over_max_payload("RESULT")


def _shape(name: str, result: bool, trim: bool, lane: tuple[bool, bool] | None = None) -> Shape:
    """A flat job's COMPLETE, with or without RESULT, with or without one row trimmed; with
    `lane` (the lane's gactive field goes, the lane enters the ring), a lane job's, whose
    slot comes back (lanes.slot_back)."""
    row: tuple[Any, ...] = (b"HSET", Slot("row"), job.STATE, job.COMPLETED, job.FINISHED_MS,
                            Slot("now"))
    if result:
        row += (b"result", Slot("result"))
    ops: list[tuple[Any, ...]] = [
        (b"ZREM", Slot("active"), Slot("id")),
        row,
        (b"ZADD", Slot("completed"), Slot("now"), Slot("id")),
        (b"HSET", Slot("metric"), b"count", Slot("count")),
    ]
    if trim:
        ops += [(b"ZREM", Slot("completed"), Slot("victim")), (b"DEL", Slot("victim_row"))]
    if lane is not None:
        drop, enters = lane
        if drop:
            ops.append((b"HDEL", Slot("gactive"), Slot("group")))
        else:
            ops.append((b"HSET", Slot("gactive"), Slot("group"), Slot("running")))
        if enters:
            ops += [(b"ZADD", Slot("ring"), Slot("rr"), Slot("group")),
                    (b"HSET", Slot("meta"), lanes.RR, Slot("rr"))]
    return Shape(name, *ops)


_BOTH = (False, True)
# (result given, one row trimmed) -> the shape: the plans of nearly every COMPLETE.
SHAPES: Final = {(result, trim): _shape(f"complete result={result} trim={trim}", result, trim)
          for result in _BOTH for trim in _BOTH}
# ... and of a lane job's, (result, trim, its gactive field goes, the lane enters the ring).
LANE_SHAPES: Final = {
    (result, trim, drop, enters): _shape(
        f"complete lane result={result} trim={trim} drop={drop} enters={enters}",
        result, trim, (drop, enters))
    for result in _BOTH for trim in _BOTH for drop in _BOTH for enters in _BOTH}


class CompleteArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("keys", "id", "token", "result", "config")

    def __init__(
            self, keys: QueueKeys, id: bytes, token: bytes, result: bytes | None,
            config: Config) -> None:
        self.keys = keys
        self.id = id
        self.token = token
        self.result = result
        self.config = config


def parse(argv: list[bytes], config: Config) -> CompleteArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    result = None
    if len(argv) > 4:
        result = parse_args.options(argv, 4, _KEYWORDS).get(b"RESULT")
        if result is not None and len(result) > config.max_payload:
            raise RESULT_TOO_BIG()
    return CompleteArgs(keys, parse_args.job_id(argv[2]), argv[3], result, config)


def plan(args: CompleteArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    row = job.held(view, keys, args.id, args.token)
    settings = queue_settings.of_queue(view, keys, args.config)
    small = args.result is None or len(args.result) < BIG_VALUE  # a big one is logged uncopied
    if small and not settings.keep_completed_ms and not ties.tied(row):
        fast = _shaped(args, view, now_ms, settings, lanes.group_of(row))
        if fast is not None:
            return Plan(fast[0], "OK", [_event(args, row, now_ms)], (), fast[1])
    return general(args, view, row, settings, now_ms)


def _event(args: CompleteArgs, row: Hash, now_ms: int) -> events.Event:
    claimed = parse_int(hashes.get(row, job.CLAIMED_MS) or b"")
    return (events.COMPLETED, args.keys.queue, args.id, now_ms,
            {"duration_ms": now_ms - claimed if claimed is not None else 0})


def general(args: CompleteArgs, view: View, row: Hash, settings: queue_settings.Settings,
            now_ms: int) -> Plan:
    """The plan in general, through the lanes' ledger and the general trim: what the Shape
    path must plan alike where it answers (tests/verbs/test_complete.py,
    tests/verbs/test_lanes_fast.py)."""
    keys = args.keys
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    end = ties.Ending(view, keys, args.config, now_ms, ledger, [args.id], job.COMPLETED, settings)
    end.happened.append(_event(args, row, now_ms))
    end.ops += job.leave_active_ops(keys, args.id, row, ledger)
    end.ops.append((b"HSET", keys.job(args.id), *_fields(args, ms_text(now_ms))))
    end.completed(args.id, row, args.result)
    return Plan(end.finish(), "OK", end.happened, tuple(end.due))


def _fields(args: CompleteArgs, now: bytes) -> list[Any]:
    fields: list[Any] = [job.STATE, job.COMPLETED, job.FINISHED_MS, now]
    if args.result is not None:
        fields += [b"result", args.result]
    return fields


def _shaped(args: CompleteArgs, view: View, now_ms: int, settings: queue_settings.Settings,
            group: bytes | None) -> tuple[list[Op], Shape] | None:
    """A COMPLETE trimming at most one row, which has no log and is no flow's parent
    (nearly every COMPLETE):
    its ops from a Shape, without the lanes' ledger or the general trim; None
    otherwise. The plan finish_ops and retention.trim_ops would make, checked alike
    (tests/verbs/test_complete.py compares the two). A job of lane `group` also gets
    its slot back as lanes.slot_back finds it, when it does (tests/verbs/test_lanes_fast.py
    compares that with what lanes.settle writes)."""
    keys = args.keys
    back = None
    if group is not None:
        back = lanes.slot_back(view, keys, settings.lane_limit, group)
        if back is None:
            return None
    count = incremented(view.hget(keys.metrics_completed, b"count"), 1)
    completed = view.zset(keys.completed)
    excess = (0 if completed is None else len(completed)) + 1 - settings.keep_completed
    if excess > 1:
        return None
    shape = SHAPES[(args.result is not None, excess == 1)]
    now = ms_text(now_ms)
    values = [keys.active, args.id, keys.job(args.id), now]
    if args.result is not None:
        values.append(args.result)
    values += [keys.completed, keys.metrics_completed, b"%d" % count]
    if excess == 1:
        victim = retention.oldest_or(completed, (now_ms, args.id))
        if view.type_name(keys.log_prefix + victim) != "none":
            return None  # its log goes with it (job_log.del_op)
        if view.type_name(keys.children_prefix + victim) != "none":
            return None  # a flow's parent: its record goes with it (retention.trim_ops)
        values += [victim, keys.job(victim)]
    if group is None or back is None:
        return shape.ops(*values), shape
    running, rr = back
    shape = LANE_SHAPES[(args.result is not None, excess == 1, not running, rr is not None)]
    values += [keys.gactive, group]
    if running:
        values.append(b"%d" % running)
    if rr is not None:
        values += [keys.ring, b"%d" % rr, keys.meta]
    return shape.ops(*values), shape


COMMANDS: Final = [
    verb_command("emq.complete", -4, "write fast", sys.modules[__name__],
                 summary="Finish a claimed job")
]
