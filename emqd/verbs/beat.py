"""EMQ.BEAT queue name

A worker's beat: what an operator asks of the worker named NAME on QUEUE
(EMQ.WORKER, or the dashboard's Workers page). NAME is the name the worker's
connections give themselves (CLIENT SETNAME, emqd/sessions/worker_name.py), so that an
instruction is for one run of one worker: its name holds its host, pid and
start time. The worker sends this every few seconds for each of its queues
and obeys the reply (protocol section 22.6): `run` (go on), `quiet` (claim
nothing more from this queue; finish what it holds) or `stop` (claim nothing
more, finish what it holds, and exit).

Reads `p.."workers"` (name -> the instruction and when it was given); a value
a client's write left in another form reads as `run`.

Returns: `run`, `quiet` or `stop` (bulk string).

Errors: `ERR invalid queue name`; `ERR invalid worker name` (1..4096 bytes);
WRONGTYPE. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.rules.job_log import MAX_LINE
from emqd.store import hash as hashes
from emqd.store.keyspace import View

RUN: Final = b"run"
QUIET: Final = b"quiet"
STOP: Final = b"stop"
ORDERS: Final = (QUIET, STOP)  # what p.."workers" may hold; RUN is the absence of one


@dataclass(frozen=True, slots=True)
class BeatArgs:
    keys: QueueKeys
    name: bytes


def worker_name(raw: bytes) -> bytes:
    """NAME: 1..4096 bytes (a worker's connection name, emqd/sessions/worker_name.py)."""
    if not raw or len(raw) > MAX_LINE:
        raise errors.INVALID_WORKER()
    return raw


def order_of(value: bytes | None) -> bytes:
    """The instruction a stored value gives: its first word when it is one, else `run`."""
    word = b"" if value is None else value.split(b" ", 1)[0]
    return word if word in ORDERS else RUN


def parse(argv: list[bytes], config: Config) -> BeatArgs:
    return BeatArgs(queue_keys(parse_args.queue_name(argv[1])), worker_name(argv[2]))


def plan(args: BeatArgs, view: View, now_ms: int, run_id: bytes) -> bytes:
    orders = view.hash(args.keys.workers)
    return order_of(None if orders is None else hashes.get(orders, args.name))


COMMANDS: Final = [
    verb_command("emq.beat", 3, "readonly fast", sys.modules[__name__],
                 summary="A worker's beat: run, quiet or stop, as an operator asked")
]
