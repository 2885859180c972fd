"""The schedules' jobs, added by housekeeping: the planner its timer runs (no command).

    plan(slice_args(queue, limit, config), keyspace, now, run_id)

For each schedule of the queue whose next slot has come (the first LIMIT
members of `p.."repeats"` scored <= now, in slot order): the job of the
latest slot at or before now, with the id `NAME:SLOT_MS` (rules/enqueue.py,
as ADD makes it, with `repeat` = NAME in its row), unless a row with that id
exists; then the schedule's next slot, the first after now (`ZADD repeats`).
So every slot gets at most one job, also across a restart or a rewrite of
the log (the slot and the job are one plan, and the id would refuse a second
job anyway); slots that passed while the server was down give one job, the
latest's, not one each. A member whose schedule hash is gone is removed from
`repeats`. A schedule a client's HSET made unreadable refuses the plan
(housekeeping applies the schedules before it, logs it once and tries again).

Returns: how many jobs were added. Errors: `ERR schedule 'x' holds an invalid
value`; WRONGTYPE; ADD's refusals for a corrupt `meta`.
"""

from __future__ import annotations

from typing import Any

from emqd.commit.plan import REPEATING, Op, Plan
from emqd.config import Config
from emqd.rules import args as parse_args
from emqd.rules import enqueue, schedules
from emqd.store.keyspace import View


def slice_args(queue: bytes, limit: int, config: Config) -> parse_args.QueueSlice:
    return parse_args.queue_slice(queue, limit, config)


def plan(args: parse_args.QueueSlice, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    index = view.zset(keys.repeats)
    names = [] if index is None else index.due(now_ms, args.limit)
    if not names:
        return Plan([], 0, None, ())
    new = enqueue.Enqueue(view, args.config, now_ms)
    gone: list[bytes] = []
    moved: list[Any] = []
    earliest: int | None = None
    for name in names:
        row = view.hash(keys.repeat(name))
        if row is None:
            gone.append(name)
            continue
        schedule = schedules.read(name, row)
        latest, following = schedules.slots(name, schedule.rule, now_ms)
        job_id = schedules.job_id(name, latest)
        if not new.exists(keys, job_id):
            new.add(keys, schedule.job(name), job_id)
        moved += [following, name]
        earliest = following if earliest is None else min(earliest, following)
    ops: list[Op] = new.ops()
    if gone:
        ops.append((b"ZREM", keys.repeats, *gone))
    if moved:
        ops.append((b"ZADD", keys.repeats, *moved))
    due = tuple(new.due)
    if earliest is not None:
        due += ((REPEATING, keys.queue, earliest),)
    return Plan(ops, len(new.events), new.events, due)
