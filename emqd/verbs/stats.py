"""EMQ.STATS queue

Returns: a map of integers, in this order: `pending` (the flat queue and every
lane together), `active`, `scheduled`, `dead`, `completed` (the set sizes),
`completed_total` (`metrics:completed count`), `failed_total`
(`metrics:failed count`), `trimmed_dead` (`metrics:failed trimmed`: dead
letters deleted by retention), `paused` (0 or 1), `waiting` (flows' parents
waiting for their children), then the counters under the names /metrics and
the dashboard give them (after the others, so that readers of the older reply
by position are not moved): `added_total` (`meta added`), `dead_total` (jobs
that died: the same count as `failed_total`, which keeps its old name for
existing readers), `failures_total` (every EMQ.FAIL: failed attempts, retried
or not), `retried_total` (failures that scheduled a retry), `stalled_total`
(counted stall recoveries) and `revived_total`, from `p.."metrics"`; then
`cancelled` (the `cancelled` set's size) and `cancelled_total` (`metrics
cancelled`: jobs EMQ.CANCEL ended). A queue that never existed gives zeros.

Cost: O(1) whatever the number of lanes. The lanes' waiting jobs are not
counted lane by lane: whoever moves a job into or out of a lane keeps the
running total in `meta` field `lanes_pending` (lanes.py, one HINCRBY in the
same plan), and STATS reads that one field.

Errors: `ERR invalid queue name`; `WRONGTYPE` when a key holds the other type;
a counter that is not an integer (a plain HSET put it there) answers
HINCRBY's `ERR hash value is not an integer`, as the next plan that
increments it would. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.compat.numbers import parse_int
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules.lanes import LANES_PENDING
from emqd.rules.retention import TRIMMED
from emqd.store.keyspace import View
from emqd.verbs.pause import PAUSED, is_paused


@dataclass(frozen=True, slots=True)
class StatsArgs:
    keys: QueueKeys


def parse(argv: list[bytes], config: Config) -> StatsArgs:
    return StatsArgs(queue_keys(parse_args.queue_name(argv[1])))


def _counter(value: bytes | None) -> int:
    if value is None:
        return 0
    number = parse_int(value)
    if number is None:
        raise errors.HASH_NOT_INTEGER()
    return number


def counts(view: View, keys: QueueKeys) -> dict[bytes, int]:
    """The reply's figures, in its order (the dashboard and /metrics read them too)."""
    pending = view.zcard(keys.pending)
    lanes = view.hget(keys.meta, LANES_PENDING)
    return {
        b"pending": pending + _counter(lanes),
        b"active": view.zcard(keys.active),
        b"scheduled": view.zcard(keys.scheduled),
        b"dead": view.zcard(keys.dead),
        b"completed": view.zcard(keys.completed),
        b"completed_total": _counter(view.hget(keys.metrics_completed, b"count")),
        b"failed_total": _counter(view.hget(keys.metrics_failed, b"count")),
        b"trimmed_dead": _counter(view.hget(keys.metrics_failed, TRIMMED)),
        b"paused": int(is_paused(view.hget(keys.meta, PAUSED))),
        b"waiting": view.zcard(keys.waiting),
        b"added_total": _counter(view.hget(keys.meta, b"added")),
        b"dead_total": _counter(view.hget(keys.metrics_failed, b"count")),
        b"failures_total": _counter(view.hget(keys.metrics, b"failed")),
        b"retried_total": _counter(view.hget(keys.metrics, b"retried")),
        b"stalled_total": _counter(view.hget(keys.metrics, b"stalled")),
        b"revived_total": _counter(view.hget(keys.metrics, b"revived")),
        b"cancelled": view.zcard(keys.cancelled),
        b"cancelled_total": _counter(view.hget(keys.metrics, b"cancelled")),
    }


def plan(args: StatsArgs, view: View, now_ms: int, run_id: bytes) -> dict[bytes, int]:
    return counts(view, args.keys)


COMMANDS: Final = [
    verb_command("emq.stats", 2, "readonly fast", sys.modules[__name__], summary="Queue counts")
]
