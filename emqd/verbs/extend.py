"""EMQ.EXTEND queue id token lease-ms

Heartbeat: the holder of TOKEN pushes its lease deadline to now + LEASE_MS
and stamps the current process's run_id as `lease_epoch` (a lease extended
after a restart is this process's lease again, and counts if it stalls).
Plan: `ZADD active (now + LEASE_MS) id`, `HSET lease_epoch run_id` (and `holder`,
the connection's id, when the connection has a name: emqd/command.py's holder_of).

Returns: the new deadline (integer, ms).

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; `ERR
LEASE_MS must be a positive integer`; `ERR invalid LEASE_MS in 'emq.extend'
command` when now + LEASE_MS is beyond 2^53 ms, the last a score holds exactly (the
deadline answered must be the one stored); WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import LEASED, Plan
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job
from emqd.store.keyspace import View

NAME: Final = "emq.extend"


class ExtendArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("keys", "id", "token", "lease_ms", "holder")

    def __init__(self, keys: QueueKeys, id: bytes, token: bytes, lease_ms: int) -> None:
        self.keys = keys
        self.id = id
        self.token = token
        self.lease_ms = lease_ms
        self.holder = b""  # with_holder: a named connection's id


def with_holder(args: ExtendArgs, holder: bytes) -> ExtendArgs:
    args.holder = holder
    return args


def parse(argv: list[bytes], config: Config) -> ExtendArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    return ExtendArgs(keys, job_id, argv[3], parse_args.positive(argv[4], "LEASE_MS"))


def plan(args: ExtendArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    job.held(view, keys, args.id, args.token)
    deadline = now_ms + args.lease_ms
    if deadline > MAX_TIME_MS:
        raise errors.invalid_time("LEASE_MS", NAME)
    stamp: tuple[bytes, ...] = (job.LEASE_EPOCH, run_id)
    if args.holder:
        stamp += (job.HOLDER, args.holder)
    return Plan(
        [
            (b"ZADD", keys.active, deadline, args.id),
            (b"HSET", keys.job(args.id), *stamp),
        ],
        deadline,
        None,
        ((LEASED, keys.queue, deadline),),
    )


COMMANDS: Final = [
    verb_command(NAME, 5, "write fast", sys.modules[__name__],
                 summary="Push a claimed job's lease deadline")
]
