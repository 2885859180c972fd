"""Lanes whose rate window has room again, back into the ring: housekeeping's planner.

    plan(slice_args(queue, limit, config), keyspace, now, run_id)

A lane whose window is full waits in `p.."rated"` (group -> when its window
has room; rules/rates.py, lanes.py). At that time housekeeping runs this
plan: each due lane (the first LIMIT members scored <= now) leaves `rated`
and the lanes' bookkeeping puts it back in the ring when it can be served
(`lanes.settle`: waiting jobs, a free slot, room in its window), which wakes
parked claimers. A lane whose window is still full (its limit was lowered
meanwhile) stays in `rated` with its new time.

Returns: how many lanes left `rated`. Errors: a corrupt lane limit, rate or
counter; WRONGTYPE.
"""

from __future__ import annotations

from typing import Any

from emqd.commit.plan import RATED, Op, Plan
from emqd.config import Config
from emqd.rules import args as parse_args
from emqd.rules import lanes
from emqd.store.keyspace import View


def slice_args(queue: bytes, limit: int, config: Config) -> parse_args.QueueSlice:
    return parse_args.queue_slice(queue, limit, config)


def plan(args: parse_args.QueueSlice, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    rated = view.zset(keys.rated)
    groups = [] if rated is None else rated.due(now_ms, args.limit)
    if not groups:
        return Plan([], 0, None, ())
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    released: list[bytes] = []
    held: list[Any] = []
    due = []
    for group in groups:
        window = ledger.window(group)
        if window is not None and window.free <= 0:
            at = window.frees_at()
            held += [at, group]
            due.append((RATED, keys.queue, at))
        else:
            released.append(group)
            ledger.waiting.setdefault(group, 0)  # touched: settle looks at it again
    ops: list[Op] = []
    if released:
        ops.append((b"ZREM", keys.rated, *released))
    if held:
        ops.append((b"ZADD", keys.rated, *held))
    ops += lanes.settle(ledger)
    return Plan(ops, len(released), None, tuple(due))
