"""Retention (protocol section 6.3): the oldest finished rows go, with their set entries and logs.

`keep_completed` / `keep_dead` bound the `completed` and `dead` sets by count,
`keep_completed_ms` / `keep_dead_ms` (0: off) by age (the `cancelled` set, of the
jobs EMQ.CANCEL ended, by the completed settings: a cancelled job is a finished
job without a result, and needs no knob of its own): a row finished that
long ago is in excess too (a set is scored by finish time, so the rows too
old are its front). A plan that adds finished jobs (COMPLETE, FAIL at the
cap, a dead-lettering sweep or CLAIM) trims at most SLICE excess rows of that
set in the same plan, oldest first in ZPOPMIN order, counting the rows it
adds itself. Housekeeping trims the rest in slices by running this module's
planner, and comes back when the oldest row will age out (`next_aging`):

    plan = retention.plan(retention.slice_args(queue, config), keyspace, now, run_id)
    # plan.reply: rows deleted in this slice (<= SLICE per set); again while > 0

so lowering a setting never stalls the loop. Dead letters deleted here are
counted in field `trimmed` of p.."metrics:failed" (EMQ.STATS' `trimmed_dead`);
completed rows are not counted (`completed_total` already counts them). A
trimmed row that is a flow's parent takes its record with it
(rules/flows.py): a finished parent keeps its record (its children and their
results) for as long as its row lives, so that its page and EMQ.CHILDREN still
list them, and the trim that deletes the row deletes the record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import job_log
from emqd.rules import settings as queue_settings
from emqd.store import hash as hashes
from emqd.store.hash import incremented
from emqd.store.keyspace import View
from emqd.store.zset import ZSet

SLICE: Final = 100
COMPLETED: Final = "completed"
DEAD: Final = "dead"
CANCELLED: Final = "cancelled"
KINDS: Final = (COMPLETED, DEAD, CANCELLED)  # the sets of finished jobs, each trimmed
TRIMMED: Final = b"trimmed"  # field of p.."metrics:failed": dead letters deleted by retention
# the row field of a flow's parent (rules/flows.py re-exports it): it has a record. Declared
# here because a trim deletes a parent's record with its row, and flows imports retention.
CHILDREN: Final[bytes] = b"children"


def set_key(keys: QueueKeys, kind: str) -> bytes:
    if kind == COMPLETED:
        return keys.completed
    return keys.cancelled if kind == CANCELLED else keys.dead


def kept(settings: queue_settings.Settings, kind: str) -> tuple[int, int]:
    """(rows kept, their age limit in ms) of a kind of finished job: the dead letters by
    `keep_dead*`, the completed and the cancelled jobs by `keep_completed*`."""
    if kind == DEAD:
        return settings.keep_dead, settings.keep_dead_ms
    return settings.keep_completed, settings.keep_completed_ms


def trim_ops(view: View, keys: QueueKeys, kind: str, keep: int,
             added: tuple[Any, ...] | list[Any] = (), keep_ms: int = 0,
             now_ms: int = 0) -> list[Op]:
    """The ops that trim `kind`'s set towards `keep` rows, and of rows finished more than
    `keep_ms` before `now_ms` (0: no age limit), deleting at most SLICE.

    `added` holds the (score, id) pairs the same plan adds to the set before
    these ops run. Returns the ops (empty when nothing is in excess): ZREM of
    the victims, DEL of their rows (and of their logs, job_log.py) and, for dead letters, `HINCRBY
    metrics:failed trimmed k` (a corrupt `trimmed` refuses with HINCRBY's
    text, so the plan cannot fail halfway).
    """
    zkey = set_key(keys, kind)
    zset = view.zset(zkey)
    size = 0 if zset is None else len(zset)
    excess = size + len(added) - keep
    if keep_ms and zset is not None:
        excess = max(excess, zset.end_of(now_ms - keep_ms))  # finished too long ago
    excess = min(excess, SLICE)
    if excess <= 0:
        return []
    if len(added) == 1 and excess == 1:
        victims = [oldest_or(zset, added[0])]
    else:
        new = {member for _, member in added}
        head = [] if zset is None else [pair for pair in zset.walk(0, excess)]
        victims = [member for _, member in sorted(
            [pair for pair in head if pair[1] not in new] + [(s, m) for s, m in added])[:excess]]
    delete = job_log.del_op(view, keys, victims)
    records: list[bytes] = []
    for victim in victims:
        row = view.hash(keys.job(victim))
        if row is not None and hashes.has(row, CHILDREN):
            records += [keys.children(victim), keys.results(victim)]
    if records:
        delete = (*delete, *records)
    ops: list[Op] = [(b"ZREM", zkey, *victims), delete]
    if kind == DEAD:
        row = view.hash(keys.metrics_failed)
        incremented(None if row is None else hashes.get(row, TRIMMED), len(victims))
        ops.append((b"HINCRBY", keys.metrics_failed, TRIMMED, len(victims)))
    return ops


def oldest_or(zset: ZSet | None, added: tuple[Any, bytes]) -> bytes:
    """The steady state of a set at its bound, one finished job in and one row out:
    the row that goes, the set's oldest or the (score, id) just `added` if older."""
    oldest = None if zset is None else zset.first()
    if oldest is None:
        return added[1]
    score, member = oldest
    at: float = added[0]  # an int or a float: compared as numbers, not as tuples
    return member if score < at or (score == at and member <= added[1]) else added[1]


# --- one housekeeping slice --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SliceArgs:
    keys: QueueKeys
    config: Config


def slice_args(queue: bytes, config: Config) -> SliceArgs:
    """Housekeeping's slice of both trims (each caps its own size)."""
    return SliceArgs(queue_keys(queue), config)


def plan(args: SliceArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    """One slice of both trims; the reply is how many rows it deletes (0: nothing to do)."""
    keys = args.keys
    settings = queue_settings.of_queue(view, keys, args.config)
    ops: list[Op] = []
    for kind in KINDS:
        keep, keep_ms = kept(settings, kind)
        ops += trim_ops(view, keys, kind, keep, (), keep_ms, now_ms)
    deleted = sum(len(op) - 2 for op in ops if op[0] == b"ZREM")  # the victims, not their logs
    return Plan(ops, deleted, due=())


def next_aging(view: View, keys: QueueKeys, config: Config) -> int | None:
    """When the oldest finished row of the queue outlives its age limit (None: no limit,
    or no row). Housekeeping's retention timer comes back then."""
    settings = queue_settings.of_queue(view, keys, config)
    times = []
    for kind in KINDS:
        keep_ms = kept(settings, kind)[1]
        zset = view.zset(set_key(keys, kind)) if keep_ms else None
        first = None if zset is None else zset.first()
        if first is not None:
            times.append(math.ceil(first[0]) + keep_ms)
    return min(times) if times else None
