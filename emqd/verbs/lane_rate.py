"""EMQ.LANE.RATE queue group <max per-ms | OFF>

Lane GROUP's rate limit (rules/rates.py), beside EMQ.LANE.LIMIT's
concurrency: at most MAX claims of its jobs in any window of PER_MS. Plan:
`HSET p.."grate" GROUP MAX:PER_MS` (OFF: `HDEL`, `DEL` of its window
`p.."rate:lane:"..GROUP` and `ZREM p.."rated" GROUP`), and the ring made
right in the same plan (lanes.py): a lane the new limit holds back leaves it
(and waits in `rated` until its window has room), one it frees enters it at
the back, so parked claimers are woken.

Returns: `OK`.

Errors: `ERR MAX must be a positive integer` (PER_MS the same); `ERR invalid
PER_MS in 'emq.lane.rate' command` beyond 2^53 ms (rate.check_window); `ERR syntax
error`; `ERR invalid queue name`, `ERR invalid group name`; a corrupt lane
counter (HINCRBY's text) or limit; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd.command import verb_command
from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import lanes, rates
from emqd.store import hash as hashes
from emqd.store.keyspace import View
from emqd.verbs.rate import check_window, parse_rate


@dataclass(frozen=True, slots=True)
class LaneRateArgs:
    keys: QueueKeys
    group: bytes
    rate: rates.Rate | None
    config: Config


def parse(argv: list[bytes], config: Config) -> LaneRateArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    return LaneRateArgs(keys, parse_args.group_name(argv[2]), parse_rate(argv, 3), config)


def plan(args: LaneRateArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys, group, rate = args.keys, args.group, args.rate
    check_window(rate, now_ms, "emq.lane.rate")
    table = view.hash(keys.lane_rates)
    rated = view.zset(keys.rated)
    ops: list[Op] = []
    if rate is not None:
        ops.append((b"HSET", keys.lane_rates, group, rate.stored()))
    else:
        if table is not None and hashes.has(table, group):
            ops.append((b"HDEL", keys.lane_rates, group))
        if view.type_name(keys.lane_rate_log(group)) != "none":
            ops.append((b"DEL", keys.lane_rate_log(group)))
        if rated is not None and group in rated:
            ops.append((b"ZREM", keys.rated, group))
    ledger = lanes.Ledger(view, keys, args.config, now_ms)
    ledger.set_rate(group, rate)
    ledger.window(group)  # looked at even without waiting jobs: full now, it waits in `rated`
    ops += lanes.settle(ledger)
    return Plan(ops, "OK", None, tuple(ledger.due))


COMMANDS: Final = [
    verb_command("emq.lane.rate", -4, "write fast", sys.modules[__name__],
                 summary="Set a lane's rate limit: at most MAX claims per PER_MS")
]
