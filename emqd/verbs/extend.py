"""EMQ.EXTEND QUEUE ID TOKEN LEASE_MS

Heartbeat: the holder of TOKEN pushes its lease deadline to now + LEASE_MS
and stamps the current process's run_id as `lease_epoch` (a lease extended
after a restart is this process's lease again, and counts if it stalls).
Plan: `ZADD active (now + LEASE_MS) id`, `HSET lease_epoch run_id`.

Returns: the new deadline (integer, ms).

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; `ERR
LEASE_MS must be a positive integer`; WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Plan
from emqd.verbs import args as parse_args
from emqd.verbs import job
from emqd.verbs.runner import Need, Reads, verb_command


@dataclass(frozen=True, slots=True)
class ExtendArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    lease_ms: int


def parse(argv: list[bytes], config: Config) -> ExtendArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    return ExtendArgs(keys, job_id, argv[3], parse_args.positive(argv[4], "LEASE_MS"))


def decide(args: ExtendArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    row = job.held(args.keys, args.id, args.token, reads)
    if type(row) is Need:
        return row
    return now_ms + args.lease_ms


def plan(args: ExtendArgs, deadline: int, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    return Plan(
        [
            (b"ZADD", keys.active, deadline, args.id),
            (b"HSET", keys.job(args.id), job.LEASE_EPOCH, run_id),
        ],
        deadline,
    )


COMMANDS = [
    verb_command("emq.extend", 5, "write fast", sys.modules[__name__],
                 summary="Push a claimed job's lease deadline")
]
