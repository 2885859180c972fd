"""EMQ.REPEAT.DEL queue name

Deletes the schedule NAME of QUEUE (rules/schedules.py): `DEL
p.."repeat:"..NAME`, `ZREM p.."repeats" NAME`. The jobs it already added stay.

Returns: 1, or 0 when there was no such schedule (nothing written).

Errors: `ERR invalid queue name`, `ERR invalid schedule name`; WRONGTYPE when
`repeats` holds a hash.
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
from emqd.rules import schedules
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class RepeatDelArgs:
    keys: QueueKeys
    name: bytes


def parse(argv: list[bytes], config: Config) -> RepeatDelArgs:
    return RepeatDelArgs(queue_keys(parse_args.queue_name(argv[1])),
                         schedules.schedule_name(argv[2]))


def plan(args: RepeatDelArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    index = view.zset(keys.repeats)
    key = keys.repeat(args.name)
    ops: list[Op] = []
    if view.type_name(key) != "none":
        ops.append((b"DEL", key))
    if index is not None and args.name in index:
        ops.append((b"ZREM", keys.repeats, args.name))
    return Plan(ops, 1 if ops else 0, None, ())


COMMANDS: Final = [
    verb_command("emq.repeat.del", 3, "write fast", sys.modules[__name__],
                 summary="Delete a schedule")
]
