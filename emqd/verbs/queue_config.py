"""EMQ.CONFIG queue <GET [field] | SET field value [field value ...]>

A queue's own settings (protocol section 6.3), stored in `p.."config"` over the
server's defaults. Field names are case-insensitive and stored in lower case.

Returns: `GET` alone, a map of every setting (`max_attempts`, `backoff`,
`max_stalled`, `keep_completed`, `keep_dead`, `lane_limit`) to its effective
value as a bulk string (the queue's own, else the server's default); `GET
field`, that value; `SET`, `OK` after every pair was validated (one invalid
pair and nothing is written). A stored value that a plain HSET made invalid
is shown as stored, so that an operator can see it and SET it right. SET of
`lane_limit` also puts the lanes whose slots it frees into the ring (and
takes out those it fills) in the same plan (lanes.retune).

Errors: `ERR unknown field 'x'`; the field's own check (`ERR max_attempts
must be a positive integer`, `ERR invalid backoff rule`, ...); `ERR syntax
error` for another subcommand, SET without pairs or with a field twice, GET
with more than one field; `ERR invalid queue name`; `WRONGTYPE` when `config`
is a sorted set.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import CONFIGURED, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.reply import Reply
from emqd.rules import args as parse_args
from emqd.rules import lanes, settings
from emqd.store.keyspace import View


@dataclass(frozen=True, slots=True)
class ConfigArgs:
    keys: QueueKeys
    defaults: Config
    get: bool
    field: bytes | None = None  # GET field
    pairs: tuple[tuple[bytes, bytes], ...] = ()  # SET


def parse(argv: list[bytes], config: Config) -> ConfigArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    sub = argv[2].upper()
    rest = argv[3:]
    if sub == b"GET":
        if len(rest) > 1:
            raise errors.SYNTAX()
        field = None
        if rest:
            field = rest[0].lower()
            if field not in settings.FIELDS:
                raise errors.unknown_field(rest[0])
        return ConfigArgs(keys, config, True, field=field)
    if sub != b"SET" or not rest or len(rest) % 2:
        raise errors.SYNTAX()
    pairs = []
    for i in range(0, len(rest), 2):
        field = rest[i].lower()
        if field not in settings.FIELDS:
            raise errors.unknown_field(rest[i])
        settings.validate(field, rest[i + 1])
        pairs.append((field, rest[i + 1]))
    if len(dict(pairs)) != len(pairs):
        raise errors.SYNTAX()
    return ConfigArgs(keys, config, False, pairs=tuple(pairs))


def plan(args: ConfigArgs, view: View, now_ms: int, run_id: bytes) -> Plan | Reply:
    keys = args.keys
    row = view.hash(keys.config)  # also refuses SET with WRONGTYPE before anything is written
    if args.get:
        values = settings.effective_raw(row, args.defaults)
        return values if args.field is None else values[args.field]
    ops = [(b"HSET", keys.config, *(x for pair in args.pairs for x in pair))]
    limit = dict(args.pairs).get(b"lane_limit")
    if limit is not None:
        ops += lanes.retune(view, keys, args.defaults, int(limit), now_ms)
    return Plan(ops, "OK", None, ((CONFIGURED, keys.queue, 0),))


COMMANDS: Final = [
    verb_command("emq.config", -3, "write", sys.modules[__name__], summary="A queue's settings")
]
