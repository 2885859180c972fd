"""EMQ.REPEATS queue

Every schedule of QUEUE (rules/schedules.py), in the order of their next
slot: for each, a map of `name`, `next_ms` (integer), `every` (integer ms) or
`cron` and `tz` (when given), and `payload`, then the job options the
schedule gives its jobs (`priority`, `max_attempts`, `backoff`, `group`),
as stored.

Returns: an array of maps (flat field/value arrays in RESP2); empty when the
queue has no schedule. A schedule whose hash is gone (a client's DEL) is
listed with its name and `next_ms` only.

Errors: `ERR invalid queue name`; WRONGTYPE. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import schedules
from emqd.store import hash as hashes
from emqd.store.keyspace import View

_SHOWN: Final = (schedules.CRON, schedules.TZ, schedules.PAYLOAD, b"priority", b"max_attempts",
          b"backoff", b"group")


@dataclass(frozen=True, slots=True)
class RepeatsArgs:
    keys: QueueKeys


def parse(argv: list[bytes], config: Config) -> RepeatsArgs:
    return RepeatsArgs(queue_keys(parse_args.queue_name(argv[1])))


def listing(view: View, keys: QueueKeys, limit: int | None = None) -> list[dict[bytes, Any]]:
    """The schedules as the reply lists them (the dashboard shows the first `limit`)."""
    index = view.zset(keys.repeats)
    found = []
    pairs = () if index is None else index if limit is None else index.walk(0, limit)
    for score, name in pairs:
        entry: dict[bytes, Any] = {b"name": name, b"next_ms": int(score)}
        row = view.hash(keys.repeat(name))
        if row is not None:
            every = hashes.get(row, schedules.EVERY)
            if every is not None:
                entry[b"every"] = int(every) if every.isdigit() else every
            for field in _SHOWN:
                value = hashes.get(row, field)
                if value is not None:
                    entry[field] = value
        found.append(entry)
    return found


def plan(args: RepeatsArgs, view: View, now_ms: int, run_id: bytes) -> list[dict[bytes, Any]]:
    return listing(view, args.keys)


COMMANDS: Final = [
    verb_command("emq.repeats", 2, "readonly", sys.modules[__name__],
                 summary="A queue's schedules, with their next slot")
]
