"""EMQ.LOG queue id token line

The holder of TOKEN appends LINE (up to 4 KiB) to the job's log, which keeps
its newest `keep_log_lines` lines (queue setting, default 100; 0 keeps none).
Checked like EXTEND (`job.held`). The log is the sorted set `p.."log:"..ID`
(job_log.py: score the line's number, member `<number>:<line>`). Plan: `ZADD
log n n:LINE`, then `ZREM log` of the oldest lines past the setting (all of
them at once when the setting was lowered: the log of one job is bounded by
the setting it was written under); with `keep_log_lines` 0, `DEL log` if it
exists, and the line is not kept. The row is not written, so a parked
EMQ.WAIT is not woken by a log line.

Returns: the number of lines the log keeps now (integer).

Errors: `EMQSTALE job gone` / `token mismatch` / `job not active`; `ERR LINE
exceeds 4096 bytes`; `ERR job log holds an invalid line number` when a
client's write left the log's last score something other than a line number;
a corrupt queue setting; WRONGTYPE (the log key holding a hash, too). Every
refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules import job, job_log
from emqd.rules import settings as queue_settings
from emqd.store.keyspace import View

LINE_TOO_LONG: Final = errors.too_long("LINE", job_log.MAX_LINE)


@dataclass(slots=True)
class LogArgs:
    keys: QueueKeys
    id: bytes
    token: bytes
    line: bytes
    config: Config


def parse(argv: list[bytes], config: Config) -> LogArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    if len(argv[4]) > job_log.MAX_LINE:
        raise LINE_TOO_LONG()
    return LogArgs(keys, job_id, argv[3], argv[4], config)


def plan(args: LogArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    job.held(view, keys, args.id, args.token)
    keep = queue_settings.of_queue(view, keys, args.config).keep_log_lines
    key = keys.log(args.id)
    log = view.zset(key)
    size = 0 if log is None else len(log)
    if keep == 0:
        return Plan([(b"DEL", key)] if size else [], 0, None, ())
    number = job_log.next_number(log)
    ops: list[Op] = [(b"ZADD", key, number, job_log.member(number, args.line))]
    excess = size + 1 - keep
    if excess > 0 and log is not None:  # (no log has no excess)
        ops.append((b"ZREM", key, *log.head(excess)))
    return Plan(ops, min(size + 1, keep), None, ())


COMMANDS: Final = [
    verb_command("emq.log", 5, "write fast", sys.modules[__name__],
                 summary="Append a line to a claimed job's log")
]
