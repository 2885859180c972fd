"""Retention (protocol section 6.3): the oldest finished rows go, with their set entries.

`keep_completed` / `keep_dead` bound the `completed` and `dead` sets. A plan
that adds finished jobs (COMPLETE, FAIL at the cap, a dead-lettering sweep or
CLAIM) trims at most SLICE excess rows of that set in the same plan, oldest
first in ZPOPMIN order, counting the rows it adds itself. Housekeeping trims
the rest in slices by running this module through the runner:

    args = retention.slice_args(queue, config)
    plan = runner.decide_and_plan(retention, keyspace, args, now, run_id)
    # plan.reply: rows deleted in this slice (<= SLICE per set); again while > 0

so lowering a setting never stalls the loop. Dead letters deleted here are
counted in field `trimmed` of p.."metrics:failed" (EMQ.STATS' `trimmed_dead`);
completed rows are not counted (`completed_total` already counts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Op, Plan
from emqd.store.hash import incremented
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import HGET, ZCARD, ZHEAD, Need, Reads, need

SLICE = 100
COMPLETED = "completed"
DEAD = "dead"
TRIMMED = b"trimmed"  # field of p.."metrics:failed": dead letters deleted by retention


def set_key(keys: QueueKeys, kind: str) -> bytes:
    return keys.completed if kind == COMPLETED else keys.dead


def card_read(keys: QueueKeys, kind: str) -> tuple:
    """The first read of `trim_ops`: the size of `kind`'s set."""
    return (ZCARD, set_key(keys, kind))


def oldest_read(keys: QueueKeys, kind: str, count: int) -> tuple:
    """The read of the `count` oldest members of `kind`'s set, the trim's candidates."""
    return (ZHEAD, set_key(keys, kind), count)


def trim_ops(
    keys: QueueKeys, kind: str, keep: int, reads: Reads, added: tuple | list = ()
) -> Need | list[Op]:
    """The ops that trim `kind`'s set towards `keep` rows, deleting at most SLICE.

    `added` holds the (score, id) pairs the same plan adds to the set before
    these ops run. Returns the reads still needed, or the ops (empty when
    nothing is in excess): ZREM of the victims, DEL of their rows and, for
    dead letters, `HINCRBY metrics:failed trimmed k` (a corrupt `trimmed`
    refuses with HINCRBY's text, so the plan cannot fail halfway).
    """
    zset = set_key(keys, kind)
    card = card_read(keys, kind)
    if card not in reads:
        return need(card)
    excess = min(reads[card] + len(added) - keep, SLICE)
    if excess <= 0:
        return []
    head_read = oldest_read(keys, kind, excess)
    trimmed_read = (HGET, keys.metrics_failed, TRIMMED)
    wanted = (head_read, trimmed_read) if kind == DEAD else (head_read,)
    missing = [read for read in wanted if read not in reads]
    if missing:
        return need(*missing)
    new = {member for _, member in added}
    oldest = sorted(
        [(score, member) for member, score in reads[head_read] if member not in new]
        + [(score, member) for score, member in added]
    )
    victims = [member for _, member in oldest[:excess]]
    ops: list[Op] = [(b"ZREM", zset, *victims), (b"DEL", *(keys.job(v) for v in victims))]
    if kind == DEAD:
        incremented(reads[trimmed_read], len(victims))
        ops.append((b"HINCRBY", keys.metrics_failed, TRIMMED, len(victims)))
    return ops


# --- one housekeeping slice, through the runner ------------------------------------
@dataclass(frozen=True, slots=True)
class SliceArgs:
    keys: QueueKeys
    config: Config


def slice_args(queue: bytes, config: Config) -> SliceArgs:
    return SliceArgs(queue_keys(queue), config)


def decide(args: SliceArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    settings = queue_settings.from_reads(keys.config, reads, args.config)
    if settings is None:
        return need(queue_settings.settings_read(keys.config))
    ops: list[Op] = []
    for kind, keep in ((COMPLETED, settings.keep_completed), (DEAD, settings.keep_dead)):
        step = trim_ops(keys, kind, keep, reads)
        if type(step) is Need:
            return step
        ops += step  # type: ignore[arg-type]
    return ops


def plan(args: SliceArgs, ops: list[Op], now_ms: int, run_id: bytes) -> Plan:
    deleted = sum(len(op) - 1 for op in ops if op[0] == b"DEL")
    return Plan(ops, deleted)
