"""EMQ.WORKER queue <QUIET | STOP | RUN> name

What an operator asks of the worker named NAME (its connections' name, CLIENT
SETNAME: emqd/sessions/worker_name.py) on QUEUE, told to it by its next EMQ.BEAT on the
queue (protocol section 22.6): QUIET, claim nothing more from the queue and
finish what it holds; STOP, that and exit once done; RUN, go on as before (the
instruction is deleted). Faktory's quiet and terminate, Sidekiq's Quiet and
Stop buttons; the dashboard's Workers page sends this for each of a worker's
queues.

Plan: `HSET p.."workers" NAME "<quiet|stop> <now>"` (RUN: `HDEL`); in the same
plan, `stop` instructions given more than a day ago are deleted (at most
PRUNE a call: their workers have exited), so the hash holds what is current.
The module is not named after its command (worker.py) so that it is not taken
for the Python worker's.

Returns: `OK`. An instruction that is already the one stored, or RUN without
one, writes nothing.

Errors: `ERR syntax error` for another word; `ERR invalid queue name`; `ERR
invalid worker name` (1..4096 bytes); WRONGTYPE. Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import Op, Plan
from emqd.compat.numbers import parse_int
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys
from emqd.rules import args as parse_args
from emqd.store import hash as hashes
from emqd.store.keyspace import View
from emqd.verbs.beat import QUIET, RUN, STOP, order_of, worker_name

PRUNE: Final = 16  # stale `stop` instructions deleted by one call, at most
STALE_MS: Final = 86_400_000  # a `stop` this old: its worker has long exited


@dataclass(frozen=True, slots=True)
class OrderArgs:
    keys: QueueKeys
    order: bytes  # QUIET, STOP or RUN
    name: bytes


def parse(argv: list[bytes], config: Config) -> OrderArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    order = argv[2].lower()
    if order not in (QUIET, STOP, RUN):
        raise errors.SYNTAX()
    return OrderArgs(keys, order, worker_name(argv[3]))


def plan(args: OrderArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    key = args.keys.workers
    orders = view.hash(key)
    current = None if orders is None else hashes.get(orders, args.name)
    ops: list[Op] = []
    if args.order == RUN:
        if current is not None:
            ops.append((b"HDEL", key, args.name))
    elif current is None or order_of(current) != args.order:
        ops.append((b"HSET", key, args.name, b"%b %d" % (args.order, now_ms)))
    stale = [] if orders is None else _stale(orders, args.name, now_ms)
    if stale and ops:
        ops.append((b"HDEL", key, *stale))
    return Plan(ops, "OK", None, ())


def _stale(orders: hashes.Hash, name: bytes, now_ms: int) -> list[bytes]:
    """`stop` instructions (not NAME's) given more than STALE_MS ago, PRUNE at most."""
    stale = []
    for other, value in hashes.items(orders):
        if other == name or order_of(value) != STOP:
            continue
        given = parse_int(value.partition(b" ")[2])
        if given is not None and given < now_ms - STALE_MS:
            stale.append(other)
            if len(stale) == PRUNE:
                break
    return stale


COMMANDS: Final = [
    verb_command("emq.worker", 4, "write fast", sys.modules[__name__],
                 summary="Ask a worker to stop claiming (quiet), to exit when done (stop), or "
                         "to go on (run)")
]
