"""EMQ.LANE.LIMIT queue group limit

Sets lane GROUP's own concurrency limit: at most n of its jobs active at
once, 0 for no limit (protocol section 8). Without it a lane has the queue's
`lane_limit` setting. Plan: `HSET glimit GROUP n`, and the ring made right
for the new limit in the same plan (a lane with waiting jobs enters the ring
at the back when the new limit frees a slot, and leaves it when the new limit
is already reached), so parked claimers are woken when a slot opens.

Returns: `OK`.

Errors: `ERR n must be a non-negative integer`; `ERR invalid queue name`,
`ERR invalid group name`; HINCRBY's text for a corrupt `gactive` of the lane
or `meta.rr`; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd.command import verb_command
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import lanes
from emqd.store.keyspace import View


@dataclass(slots=True)
class LaneLimitArgs:
    keys: QueueKeys
    group: bytes
    limit: int
    config: Config


def parse(argv: list[bytes], config: Config) -> LaneLimitArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    group = parse_args.group_name(argv[2])
    return LaneLimitArgs(keys, group, parse_args.non_negative(argv[3], "n"), config)


def plan(args: LaneLimitArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    ledger = lanes.Ledger(view, args.keys, args.config, now_ms)
    ledger.set_limit(args.group, args.limit)
    lane_ops = lanes.settle(ledger)
    return Plan([(b"HSET", args.keys.glimit, args.group, b"%d" % args.limit), *lane_ops], "OK",
                None, ())


COMMANDS: Final = [
    verb_command("emq.lane.limit", 4, "write fast", sys.modules[__name__],
                 summary="Set a lane's concurrency limit")
]
