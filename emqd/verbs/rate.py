"""EMQ.RATE queue <max per-ms | OFF>

The queue's rate limit (rules/rates.py): at most MAX claims of QUEUE in any
window of PER_MS, lanes included. Plan: `HSET meta rate_max MAX rate_per_ms
PER_MS`; OFF: `HDEL meta rate_max rate_per_ms` and `DEL p.."rate:claims"`
(the window). The window is kept when a limit is changed: the claims made are
still the claims made. A parked `CLAIM ... BLOCK` is woken by the write to
`meta` (a higher limit may let it claim now).

Returns: `OK`. OFF on a queue without a limit writes nothing.

Errors: `ERR MAX must be a positive integer` (PER_MS the same); `ERR invalid
PER_MS in 'emq.rate' command` when a window opened now would free beyond 2^53
ms (the last a score holds exactly: a lane held out waits in `rated` scored by
that time); `ERR syntax error` for anything else; `ERR invalid queue name`;
WRONGTYPE when `meta` holds a sorted set.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import Op, Plan
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import rates
from emqd.store import hash as hashes
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class RateArgs:
    keys: QueueKeys
    rate: rates.Rate | None  # None: OFF


def parse_rate(argv: list[bytes], at: int) -> rates.Rate | None:
    """`MAX PER_MS` or `OFF` from argv[at:] (EMQ.RATE and EMQ.LANE.RATE)."""
    rest = argv[at:]
    if len(rest) == 1 and rest[0].upper() == b"OFF":
        return None
    if len(rest) != 2:
        raise errors.SYNTAX()
    return rates.Rate(parse_args.positive(rest[0], "MAX"), parse_args.positive(rest[1], "PER_MS"))


def check_window(rate: rates.Rate | None, now_ms: int, command: str) -> None:
    """Refuse a PER_MS whose window, opened now, would free beyond MAX_TIME_MS."""
    if rate is not None and now_ms + rate.per_ms > MAX_TIME_MS:
        raise errors.invalid_time("PER_MS", command)


def parse(argv: list[bytes], config: Config) -> RateArgs:
    return RateArgs(queue_keys(parse_args.queue_name(argv[1])), parse_rate(argv, 2))


def plan(args: RateArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    meta = view.hash(keys.meta)
    rate = args.rate
    check_window(rate, now_ms, "emq.rate")
    ops: list[Op] = []
    if rate is not None:
        ops.append((b"HSET", keys.meta, rates.MAX, b"%d" % rate.max, rates.PER_MS,
                    b"%d" % rate.per_ms))
    elif meta is not None and hashes.has(meta, rates.MAX):
        ops.append((b"HDEL", keys.meta, rates.MAX, rates.PER_MS))
        if view.type_name(keys.rate_log) != "none":
            ops.append((b"DEL", keys.rate_log))
    return Plan(ops, "OK", None, ())


COMMANDS: Final = [
    verb_command("emq.rate", -3, "write fast", sys.modules[__name__],
                 summary="Set a queue's rate limit: at most MAX claims per PER_MS")
]
