"""EMQ.LANES QUEUE

Returns: a map of every lane that has waiting or active jobs, group ->
`[pending, active]` (two integers), in group-name order (a flat array in
RESP2, as HGETALL answers). An empty map when there are none.

Which lanes: those in `gactive` (they have active jobs) and those in the
ring (waiting jobs and a free slot). A lane with waiting jobs is always in
one of the two, because a lane without active jobs has a free slot (see
lanes.py), so nothing else is visited: the cost is O(lanes listed).

Errors: `ERR invalid queue name`; HINCRBY's `ERR hash value is not an
integer` for a `gactive` field a plain HSET made corrupt; WRONGTYPE. Reads
only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.store.hash import incremented
from emqd.verbs import args as parse_args
from emqd.verbs import lanes
from emqd.verbs.runner import HGETALL, ZCARD, ZHEAD, Reads, need, verb_command


@dataclass(slots=True)
class LanesArgs:
    keys: QueueKeys


def parse(argv: list[bytes], config: Config) -> LanesArgs:
    return LanesArgs(queue_keys(parse_args.queue_name(argv[1])))


def decide(args: LanesArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    active_read = (HGETALL, keys.gactive)
    ring_size_read = (ZCARD, keys.ring)
    if active_read not in reads:
        return need(active_read, ring_size_read)
    ring_read = (ZHEAD, keys.ring, reads[ring_size_read])
    if ring_read not in reads:
        return need(ring_read)
    active = reads[active_read] or {}
    groups = sorted({*active, *(m for m, _ in reads[ring_read] if m != lanes.FLAT)})
    sizes = [(ZCARD, keys.lane(group)) for group in groups]
    missing = [read for read in sizes if read not in reads]
    if missing:
        return need(*missing)
    return {group: [reads[size], incremented(active.get(group), 0)]
            for group, size in zip(groups, sizes, strict=True)}


def plan(args: LanesArgs, verdict: dict, now_ms: int, run_id: bytes) -> dict:
    return verdict


COMMANDS = [
    verb_command("emq.lanes", 2, "readonly", sys.modules[__name__],
                 summary="Each lane's waiting and active jobs")
]
