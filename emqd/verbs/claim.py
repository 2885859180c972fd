"""EMQ.CLAIM QUEUE LEASE_MS [COUNT n] [BLOCK ms]

Takes up to n (default 1) jobs from the front of `pending` (lowest score,
ties to the smaller id); when the queue has lanes that can be served (its
ring exists), it goes round the ring job by job instead (lanes.serve), and
each lane job taken also takes a slot of its lane. For each: `attempts` =
next(attempts) (the token), `state active`, `lease_epoch` = run_id, `claimed_ms` = now, and
`ZADD active (now + LEASE_MS) id`. On the way, a member whose row is missing
(a ghost) is removed from pending; a row whose `attempts` or `failures` HINCRBY
would refuse is dead-lettered with that text as `last_error`. Skipped members
do not count towards n, and their writes are made even when nothing is
claimed. A paused queue (`meta.paused` 1) claims nothing.

BLOCK ms: when nothing can be claimed, the client parks (0 = for ever) on the
keys whose writes can make a job claimable (`pending`, `ring` for a lane
that gets work or a free slot, and `meta` for RESUME) and is served first
come first served; at the timeout it gets nil / an empty array. Inside MULTI, BLOCK is ignored.

Returns: without COUNT, `[id, token, payload, failures]` or nil (`*-1`);
with COUNT, an array of such arrays (empty when none).

Errors: `ERR LEASE_MS must be a positive integer` (COUNT the same), `ERR BLOCK
must be a non-negative integer`, `ERR syntax error`, `ERR invalid queue name`;
WRONGTYPE when a key, or the row of a member met, holds the other type.
Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from emqd.config import Config
from emqd.errors import ReplyError
from emqd.keys import QueueKeys, queue_keys
from emqd.plan import Block, Op, Plan
from emqd.reply import NULL_ARRAY
from emqd.store.hash import incremented
from emqd.verbs import args as parse_args
from emqd.verbs import job, lanes
from emqd.verbs import settings as queue_settings
from emqd.verbs.pause import PAUSED, is_paused
from emqd.verbs.runner import HGET, ZCARD, ZHEAD, Need, Reads, need, verb_command

_KEYWORDS = frozenset({b"COUNT", b"BLOCK"})


@dataclass(slots=True)  # not frozen: see runner.Need
class ClaimArgs:
    keys: QueueKeys
    lease_ms: int
    count: int | None
    block: int | None
    config: Config


@dataclass(slots=True)  # not frozen: see runner.Need
class Claimed:
    """The verdict: the jobs handed out (reply rows) and every op of the call."""

    jobs: list[list]
    ops: list[Op]


def parse(argv: list[bytes], config: Config) -> ClaimArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    lease_ms = parse_args.positive(argv[2], "LEASE_MS")
    opts = parse_args.options(argv, 3, _KEYWORDS)
    count = opts.get(b"COUNT")
    block = opts.get(b"BLOCK")
    return ClaimArgs(
        keys=keys,
        lease_ms=lease_ms,
        count=None if count is None else parse_args.positive(count, "COUNT"),
        block=None if block is None else parse_args.non_negative(block, "BLOCK"),
        config=config,
    )


def decide(args: ClaimArgs, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    keys = args.keys
    want = args.count or 1
    paused_read = (HGET, keys.meta, PAUSED)
    ring_read = (ZHEAD, keys.ring, lanes.ring_head_depth(want))  # empty: no servable lane
    if paused_read not in reads:
        # ZCARD active is read only for its type: the plan ZADDs there, and a hash
        # at that key must refuse the claim now rather than break the plan halfway.
        return need(paused_read, (ZCARD, keys.active), (ZHEAD, keys.pending, want), ring_read)
    if is_paused(reads[paused_read]):
        return Claimed([], [])
    if reads[ring_read]:
        return _round_robin(args, want, reads, now_ms, run_id)
    depth = want
    while True:  # read deeper until n jobs are found or pending runs out
        head_read = (ZHEAD, keys.pending, depth)
        if head_read not in reads:
            return need(head_read)
        head = reads[head_read]
        missing = [r for m, _ in head if (r := job.row_read(keys, m)) not in reads]
        if missing:
            return need(*missing)
        taken, jobs, corrupt = _walk(keys, head, want, reads)
        if len(jobs) == want or len(head) < depth:
            break
        depth = max(2 * depth, depth + want - len(jobs))
    removed: list[Op] = [(b"ZREM", keys.pending, *taken)] if taken else []
    return _verdict(args, removed, jobs, corrupt, reads, now_ms, run_id)


def _round_robin(args: ClaimArgs, want: int, reads: Reads, now_ms: int, run_id: bytes) -> Any:
    """The flat queue and the lanes served in turn (lanes.serve); the ring kept exact."""
    served = lanes.serve(args.keys, want, reads, args.config, judge)
    if type(served) is Need:
        return served
    lane_ops = lanes.settle(served.ledger, reads)  # type: ignore[union-attr]
    if type(lane_ops) is Need:
        return lane_ops
    removed: list[Op] = [(b"ZREM", key, *members)
                         for key, members in served.taken.items()]  # type: ignore[union-attr]
    return _verdict(args, removed, served.jobs, served.corrupt, reads, now_ms,  # type: ignore[union-attr]
                    run_id, lane_ops)  # type: ignore[arg-type]


def _walk(keys: QueueKeys, head: list, want: int, reads: Reads) -> tuple[list, list, list]:
    """Members taken off pending, the claimable (id, row, token), the corrupt (id, text)."""
    taken: list[bytes] = []
    jobs: list[tuple[bytes, dict, int]] = []
    corrupt: list[tuple[bytes, bytes]] = []
    for member, _ in head:
        if len(jobs) == want:
            break
        taken.append(member)
        row = reads[job.row_read(keys, member)]
        if row is None:
            continue  # a ghost: removed from pending, listed nowhere
        token = judge(row)
        if type(token) is bytes:
            corrupt.append((member, token))
            continue
        jobs.append((member, row, token))
    return taken, jobs, corrupt


def judge(row: dict) -> int | bytes:
    """A waiting row's token (next `attempts`), or the HINCRBY text that dead-letters it.

    The one rule for every member CLAIM meets, flat or in a lane (lanes.serve).
    """
    try:
        token = incremented(row.get(job.ATTEMPTS), 1)
        incremented(row.get(job.FAILURES), 0)  # CLAIM replies with it as an integer
    except ReplyError as error:
        return error.message
    return token


def _verdict(args: ClaimArgs, removed: list[Op], jobs: list, corrupt: list, reads: Reads,
             now: int, run_id: bytes, lane_ops: list[Op] | None = None) -> Any:
    keys = args.keys
    ops = list(removed)
    replies = []
    deadline = now + args.lease_ms
    zadd: list = [b"ZADD", keys.active]
    for job_id, row, token in jobs:
        attempts = b"%d" % token
        ops.append((b"HSET", keys.job(job_id), job.ATTEMPTS, attempts, job.STATE, job.ACTIVE,
                    job.LEASE_EPOCH, run_id, b"claimed_ms", b"%d" % now))
        zadd += [deadline, job_id]
        failures = row.get(job.FAILURES)
        replies.append([job_id, attempts, row.get(b"payload"), int(failures or 0)])
    if jobs:
        ops.append(tuple(zadd))
    if corrupt:
        settings = queue_settings.from_reads(keys.config, reads, args.config)
        if settings is None:
            return need(queue_settings.settings_read(keys.config))
        tail = job.finish_ops(keys, job.DEAD, [m for m, _ in corrupt], now, settings.keep_dead,
                              reads)
        if type(tail) is Need:
            return tail
        ops += [job.dead_row_op(keys, m, now, job.LAST_ERROR, text) for m, text in corrupt]
        ops += tail  # type: ignore[arg-type]
    if lane_ops:
        ops += lane_ops
    return Claimed(replies, ops)


def plan(args: ClaimArgs, verdict: Claimed, now_ms: int, run_id: bytes) -> Any:
    jobs = verdict.jobs
    if args.count is None:
        reply: Any = jobs[0] if jobs else NULL_ARRAY
    else:
        reply = jobs
    if jobs or args.block is None:
        return Plan(verdict.ops, reply)
    keys = args.keys
    return Block(
        (keys.pending, keys.ring, keys.meta),
        args.block,
        reply,
        Plan(verdict.ops, None) if verdict.ops else None,
    )


COMMANDS = [
    verb_command("emq.claim", -3, "write blocking", sys.modules[__name__],
                 summary="Lease jobs from the front of a queue")
]
