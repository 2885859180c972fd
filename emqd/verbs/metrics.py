"""EMQ.METRICS queue [FROM from-ms] [TO to-ms]

The queue's metrics history (rules/minutes.py): one entry per minute that had
something to record, oldest first, for the minutes that begin between FROM
(default 0) and TO (default now), within what the history keeps (the last 72
hours and the current one). Each entry is a map: `minute` (the minute's start,
ms), `completed`, `failures` (every EMQ.FAIL), `dead` (jobs that died), then
`wait_p50`, `wait_p95`, `wait_p99` (ms from when a job could be claimed to its
claim) and `run_p50`, `run_p95`, `run_p99` (ms from its claim to its
completion), each the midpoint of its one-byte code's range (within 6.25%),
nil in a minute without a claim (a completion). A minute is listed once it is
closed (housekeeping, just after it ends): the one in progress is not.

Returns: the array of maps (empty for a queue without history).

Errors: `ERR FROM must be a non-negative integer` (TO the same); `ERR syntax
error`; `ERR invalid queue name`; `ERR queue history holds an invalid record`
when a client's write left it unreadable; WRONGTYPE. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from emqd import errors
from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import minutes
from emqd.store import hash as hashes
from emqd.store.keyspace import View

_KEYWORDS: Final = frozenset({b"FROM", b"TO"})


@dataclass(frozen=True, slots=True)
class MetricsArgs:
    keys: QueueKeys
    start: int
    end: int | None  # None: now


def parse(argv: list[bytes], config: Config) -> MetricsArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    opts = parse_args.options(argv, 2, _KEYWORDS)
    raw_from, raw_to = opts.get(b"FROM"), opts.get(b"TO")
    return MetricsArgs(keys, 0 if raw_from is None else parse_args.non_negative(raw_from, "FROM"),
                       None if raw_to is None else parse_args.non_negative(raw_to, "TO"))


def history(view: View, keys: QueueKeys, start: int, end: int) -> list[minutes.Minute]:
    """The kept minutes that begin in [start, end], oldest first (the dashboard's charts
    read the same)."""
    row = view.hash(keys.minutes)
    if row is None:
        return []
    found: list[minutes.Minute] = []
    try:
        for field in (minutes.OLD, minutes.CURRENT):
            for hour, records in minutes.blocks(hashes.get(row, field)):
                found += [one for one in minutes.minutes_of(hour, records)
                          if start <= one.minute * minutes.MINUTE_MS <= end]
    except ValueError:
        raise errors.CORRUPT_HISTORY() from None
    return found


def entry(minute: minutes.Minute) -> dict[bytes, Any]:
    """One minute as the reply gives it."""
    shown: dict[bytes, Any] = {
        b"minute": minute.minute * minutes.MINUTE_MS, b"completed": minute.completed,
        b"failures": minute.failures, b"dead": minute.dead}
    for kind, codes in ((b"wait", minute.wait), (b"run", minute.run)):
        for rank, index in ((b"p50", 0), (b"p95", 1), (b"p99", 2)):
            shown[kind + b"_" + rank] = None if codes is None else minutes.value(codes[index])
    return shown


def plan(args: MetricsArgs, view: View, now_ms: int, run_id: bytes) -> list[dict[bytes, Any]]:
    end = now_ms if args.end is None else args.end
    return [entry(one) for one in history(view, args.keys, args.start, end)]


COMMANDS: Final = [
    verb_command("emq.metrics", -2, "readonly", sys.modules[__name__],
                 summary="A queue's completed, failures, dead and wait and run percentiles, "
                         "per minute")
]
