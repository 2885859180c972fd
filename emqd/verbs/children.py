"""EMQ.CHILDREN queue id

A flow's parent's children (rules/flows.py), so that the parent's handler can
use their results: for each child, in the order the flow gave them, `[queue,
id, state, result]`. `state` is the child's row's; a child whose row is gone
is `completed` when its result was recorded (retention deleted the row), else
`removed`. `result` is the RESULT its COMPLETE gave (empty when none), nil
until it completes. Only the direct children are listed; a child that has
children of its own is asked the same way.

The record lives as long as the parent's row: a completed parent still lists
its children, until REMOVE or retention deletes its row (and the record with it).

Returns: the array (empty for a job without children), or nil when there is
no such job.

Errors: `ERR invalid queue name`, `ERR invalid job id`; WRONGTYPE when the
row, the record or a child's row holds the other type. Reads only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from emqd.command import verb_command
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys, split_job_key
from emqd.reply import NULL_ARRAY, Reply
from emqd.rules import args as parse_args
from emqd.rules import job
from emqd.store import hash as hashes
from emqd.store.keyspace import View

REMOVED: Final = b"removed"


@dataclass(frozen=True, slots=True)
class ChildrenArgs:
    keys: QueueKeys
    id: bytes


def parse(argv: list[bytes], config: Config) -> ChildrenArgs:
    return ChildrenArgs(queue_keys(parse_args.queue_name(argv[1])), parse_args.job_id(argv[2]))


def plan(args: ChildrenArgs, view: View, now_ms: int, run_id: bytes) -> Reply:
    keys = args.keys
    if view.hash(keys.job(args.id)) is None:
        return NULL_ARRAY
    record = view.zset(keys.children(args.id))
    results = view.hash(keys.results(args.id))
    listed = []
    for child_key in () if record is None else record.members():
        where = split_job_key(child_key)
        if where is None:
            continue
        row = view.hash(child_key)
        recorded = None if results is None else hashes.get(results, child_key)
        if row is not None:
            state = hashes.get(row, job.STATE)
            result = hashes.get(row, b"result") if state == job.COMPLETED else None
            if state == job.COMPLETED and result is None:
                result = recorded if recorded is not None else b""
        else:
            state = job.COMPLETED if recorded is not None else REMOVED
            result = recorded
        listed.append([where[0], where[1], state, result])
    return listed


COMMANDS: Final = [
    verb_command("emq.children", 3, "readonly", sys.modules[__name__],
                 summary="A flow's parent's children, with their states and results")
]
