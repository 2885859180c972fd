"""EMQ.REPEAT queue name <EVERY every-ms | CRON expression [TZ zone]> payload [PRIORITY priority]
[MAXATTEMPTS max-attempts] [BACKOFF backoff-rule] [GROUP group]

Creates or replaces the schedule NAME of QUEUE (rules/schedules.py): the
server adds one job per slot, itself (housekeeping runs verbs/repeat_fire.py
at each schedule's next slot), with the id `NAME:SLOT_MS`, the schedule's
payload and options, and `repeat` = NAME in its row. Plan: `DEL` of the old
schedule's hash (when replaced), `HSET p.."repeat:"..NAME` (`every`, or `cron`
and `tz`; `payload`; the options given; `created_ms`) and `ZADD p.."repeats"
<next slot> NAME`, the first slot after now, and the queue in `emq:queues`
when it is new there (it holds jobs from its first slot on; housekeeping
finds its schedules through it after a restart). Replacing a schedule never adds
a slot's job twice: its next slot is after now, and a slot's id is taken
once (an ADD of an existing id adds nothing).

Returns: the first slot (integer, ms).

Errors: `ERR invalid queue name`; `ERR invalid schedule name` (1..200 bytes);
`ERR EVERY must be a positive integer`; `ERR invalid cron expression:
<croniter's reason>` (also for an expression with no slot ahead); `ERR
invalid time zone 'x'` (zoneinfo's names); ADD's errors for the options;
`ERR syntax error` for another option (ID, DELAY, AT, UNIQUE), a repeated
one, TZ after EVERY, or a missing value; WRONGTYPE. Every refusal writes
nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import REPEATING, Op, Plan
from emqd.config import Config
from emqd.layout import QUEUES, QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import schedules
from emqd.store.keyspace import View
from emqd.verbs import add

NAME: Final = "emq.repeat"
_OPTIONS: Final = frozenset({b"PRIORITY", b"MAXATTEMPTS", b"BACKOFF", b"GROUP"})


@dataclass(frozen=True, slots=True)
class RepeatArgs:
    keys: QueueKeys
    name: bytes
    every: bytes | None
    cron: bytes | None
    zone: bytes | None
    payload: bytes
    options: tuple[bytes, ...]  # the job row's fields: name, value, ...


def parse(argv: list[bytes], config: Config) -> RepeatArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    name = schedules.schedule_name(argv[2])
    kind = argv[3].upper()
    every = cron = zone = None
    if kind == b"EVERY":
        every = argv[4]
        schedules.every_rule(every)
        rest = 5
    elif kind == b"CRON":
        cron = argv[4]
        rest = 5
        if len(argv) > 6 and argv[5].upper() == b"TZ":
            zone = argv[6]
            rest = 7
    else:
        raise errors.SYNTAX()
    if len(argv) <= rest:
        raise errors.SYNTAX()
    payload = argv[rest]
    if len(payload) > config.max_payload:
        raise errors.PAYLOAD_TOO_BIG()
    opts = parse_args.options(argv, rest + 1, _OPTIONS)
    job = add.parse_options(keys, payload, opts, config).new_job()
    return RepeatArgs(keys, name, every, cron, zone, payload, tuple(job.row_fields()))


def plan(args: RepeatArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    if args.every is not None:
        rule = schedules.every_rule(args.every)
    else:
        assert args.cron is not None
        rule = schedules.cron_rule(args.cron, args.zone, now_ms)
    following = rule.next_after(now_ms)
    if not schedules.fits(following):
        raise errors.invalid_time("EVERY", NAME)  # a slot past the times the store holds
    key = keys.repeat(args.name)
    view.check_zset(keys.repeats)  # its type, before the ZADD
    ops: list[Op] = []
    if view.type_name(key) != "none":
        ops.append((b"DEL", key))  # replaced: its old fields go
    fields: list[Any] = [*rule.fields(), schedules.PAYLOAD, args.payload, *args.options,
                         schedules.CREATED_MS, b"%d" % now_ms]
    ops += [(b"HSET", key, *fields), (b"ZADD", keys.repeats, following, args.name)]
    queues = view.zset(QUEUES)
    if queues is None or keys.queue not in queues:
        ops.append((b"ZADD", QUEUES, now_ms, keys.queue))
    return Plan(ops, following, None, ((REPEATING, keys.queue, following),))


COMMANDS: Final = [
    verb_command(NAME, -6, "write denyoom", sys.modules[__name__],
                 summary="Create or replace a schedule that adds a job per slot")
]
