"""EMQ.LANES queue

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
from typing import Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import lanes
from emqd.store import hash as hashes
from emqd.store.hash import incremented
from emqd.store.keyspace import View


@dataclass(slots=True)
class LanesArgs:
    keys: QueueKeys


def parse(argv: list[bytes], config: Config) -> LanesArgs:
    return LanesArgs(queue_keys(parse_args.queue_name(argv[1])))


def plan(args: LanesArgs, view: View, now_ms: int, run_id: bytes) -> dict[bytes, list[int]]:
    keys = args.keys
    gactive = view.hash(keys.gactive)
    ring = view.zset(keys.ring)
    active = {} if gactive is None else hashes.as_dict(gactive)
    ringed = () if ring is None else ring.members()
    groups = sorted({*active, *(m for m in ringed if m != lanes.FLAT)})
    return {group: [view.zcard(keys.lane(group)), incremented(active.get(group), 0)]
            for group in groups}


COMMANDS: Final = [
    verb_command("emq.lanes", 2, "readonly", sys.modules[__name__],
                 summary="Each lane's waiting and active jobs")
]
