"""EMQ.WAIT queue id timeout-ms

Waits until the job is finished: `completed`, `dead` or `cancelled`. A job that already
is answers at once; otherwise the client parks on the job's row key, as a
BLOCKed CLAIM parks (emqd/wire/protocol.py), and the verb is run again after
every write to the row (each transition writes `state`, COMPLETE and the
dead letters included; REMOVE and retention delete the row) until it can
answer. TIMEOUT_MS 0 waits for ever; at the timeout the answer is nil.
Every waiter on a job is answered: nothing is taken, so nobody is served
instead of another. Inside MULTI it answers at once (nil for an unfinished
job). A finished job answers for as long as its row is kept (retention), also
after a restart, since the row is in the log.

Returns: `["completed", result]` (the RESULT given to COMPLETE, nil without
one), `["dead", last_error]` or `["cancelled", reason]` (EMQ.CANCEL's REASON,
nil without one); nil (`*-1` in RESP2, `_` in RESP3) at the timeout or at
SHUTDOWN.

Errors: `ERR no such job` when the job has no row (at the call, or once its
row was deleted while the client waited); `ERR TIMEOUT_MS must be a
non-negative integer`; `ERR timeout is out of range` when now + TIMEOUT_MS
is beyond 2^53 ms; `ERR invalid queue name`, `ERR invalid job id`;
WRONGTYPE. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import Block
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.reply import NULL_ARRAY
from emqd.rules import args as parse_args
from emqd.rules import job
from emqd.store import hash as hashes
from emqd.store.keyspace import View

RESULT: Final = b"result"


@dataclass(frozen=True, slots=True)
class WaitArgs:
    row_key: bytes
    timeout_ms: int


def parse(argv: list[bytes], config: Config) -> WaitArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    job_id = parse_args.job_id(argv[2])
    return WaitArgs(keys.job(job_id), parse_args.non_negative(argv[3], "TIMEOUT_MS"))


def plan(args: WaitArgs, view: View, now_ms: int, run_id: bytes) -> Block | list[bytes | None]:
    if now_ms + args.timeout_ms > MAX_TIME_MS:
        raise errors.TIMEOUT_RANGE()
    row = view.hash(args.row_key)
    if row is None:
        raise errors.NO_SUCH_JOB()
    state = hashes.get(row, job.STATE)
    # A finished state's answer carries one field of the row.
    if state == job.COMPLETED:
        return [state, hashes.get(row, RESULT)]
    if state == job.DEAD:
        return [state, hashes.get(row, job.LAST_ERROR)]
    if state == job.CANCELLED:
        return [state, hashes.get(row, job.CANCEL_REASON)]
    return Block((args.row_key,), args.timeout_ms, NULL_ARRAY)


COMMANDS: Final = [
    verb_command("emq.wait", 4, "readonly blocking", sys.modules[__name__],
                 summary="Wait until a job is completed, dead or cancelled")
]
