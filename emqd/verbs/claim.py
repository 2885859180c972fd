"""EMQ.CLAIM queue lease-ms [COUNT count] [BLOCK block-ms] [WITHTRACE]

Takes up to n (default 1) jobs from the front of `pending` (lowest score,
ties to the smaller id); when the queue has lanes that can be served (its
ring exists), it goes round the ring job by job instead (lanes.serve), and
each lane job taken also takes a slot of its lane. For each: `attempts` =
next(attempts) (the token), `state active`, `lease_epoch` = run_id, `claimed_ms` = now, and
`ZADD active (now + LEASE_MS) id`; from a connection with a name (CLIENT
SETNAME: a worker), `holder` = its CLIENT ID too (emqd/command.py's holder_of), which the
dashboard's Workers page reads. On the way, a member whose row is missing
(a ghost) is removed from pending; a row whose `attempts` or `failures` HINCRBY
would refuse is dead-lettered with that text as `last_error`. Skipped members
do not count towards n, and their writes are made even when nothing is
claimed. A paused queue (`meta.paused` 1) claims nothing. A queue with a
rate limit (`meta.rate_max`, rates.py) hands out no more than its window
allows, and writes each claim into the window; a lane with one is served
the same way (lanes.py). A dead-lettered row settles what it is tied to
(ties.py).

One call is bounded (protocol section 4, "Bounded calls"): COUNT above
MAX_COUNT is clamped to it, and the walk stops once it has skipped
MAX_SKIPPED members (ghosts, corrupt rows, lanes that turn out empty or
full). A call cut off so answers what it found, even nothing, and does not
park: its plan removed what it skipped, so the next call goes on from there.

BLOCK ms: when nothing can be claimed, the client parks (0 = for ever) on the
keys whose writes can make a job claimable (`pending`, `ring` for a lane
that gets work or a free slot, and `meta` for RESUME) and is served first
come first served; at the timeout it gets nil / an empty array. When it is
the queue's rate limit that holds it, it is run again when the window has
room (Block.wake_at_ms: a timer). Inside MULTI, BLOCK is ignored.

Returns: without COUNT, `[id, token, payload, failures]` or nil (`*-1`);
with COUNT, an array of such arrays (empty when none). With WITHTRACE, each
job's array has a fifth element: the trace context its producer gave (ADD's
TRACE, the row's `trace`), or nil.

Errors: `ERR LEASE_MS must be a positive integer` (COUNT the same), `ERR BLOCK
must be a non-negative integer`, `ERR invalid LEASE_MS in 'emq.claim' command`
when now + LEASE_MS is beyond 2^53 ms (`ERR timeout is out of range`
for BLOCK the same), `ERR syntax error`, `ERR invalid queue name`; WRONGTYPE
when a key, or the row of a member met, holds the other type. Every refusal
writes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit import events
from emqd.commit.plan import LEASED, Block, Due, Op, Plan, Shape, Slot
from emqd.compat.numbers import MAX_TIME_MS, decimal, ms_text, parse_int
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.layout import QueueKeys, queue_keys
from emqd.reply import NULL_ARRAY
from emqd.rules import args as parse_args
from emqd.rules import job, lanes, rates, ties, tokens
from emqd.rules import settings as queue_settings
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View
from emqd.verbs.pause import PAUSED, is_paused

_KEYWORDS: Final = frozenset({b"COUNT", b"BLOCK"})
_FLAGS: Final = frozenset({b"WITHTRACE"})
NAME: Final = "emq.claim"
MAX_COUNT: Final = 1000  # jobs one call hands out (~10 ms of the loop; a bigger COUNT is clamped)
MAX_SKIPPED: Final = 1000  # ghosts and corrupt rows one call walks past before it stops

_ROW = (b"HSET", Slot("row"), job.ATTEMPTS, Slot("token"), job.STATE, job.ACTIVE,
        job.LEASE_EPOCH, Slot("run_id"), job.CLAIMED_MS, Slot("now"))
_ROW_HELD = (*_ROW, job.HOLDER, Slot("holder"))  # from a named connection
_LEASE = (b"ZADD", Slot("active"), Slot("deadline"), Slot("id"))

# One flat job claimed, nothing skipped: the plan of nearly every CLAIM (ONE_HELD from a
# named connection).
ONE: Final = Shape("claim one", (b"ZREM", Slot("pending"), Slot("id")), _ROW, _LEASE)
ONE_HELD: Final = Shape("claim one held", (b"ZREM", Slot("pending"), Slot("id")), _ROW_HELD,
                        _LEASE)


def _lane_shape(stays: bool, held: bool) -> Shape:
    """One job from the ring's head lane (lanes.serve_one): the lane goes to the back of the
    ring (`stays`), or out of it (empty or full); `held`: from a named connection."""
    ring: tuple[tuple[Any, ...], ...]
    if stays:
        ring = ((b"ZADD", Slot("ring"), Slot("rr"), Slot("group")),
                (b"HSET", Slot("meta"), lanes.RR, Slot("rr"), lanes.LANES_PENDING,
                 Slot("lanes_pending")))
    else:
        ring = ((b"ZREM", Slot("ring"), Slot("group")),
                (b"HSET", Slot("meta"), lanes.LANES_PENDING, Slot("lanes_pending")))
    return Shape(f"claim lane stays={stays} held={held}", (b"ZREM", Slot("lane"), Slot("id")),
                 _ROW_HELD if held else _ROW, _LEASE,
                 (b"HSET", Slot("gactive"), Slot("group"), Slot("running")), *ring)


LANE_SHAPES: Final = {(stays, held): _lane_shape(stays, held)
                      for stays in (False, True) for held in (False, True)}


class ClaimArgs:
    # A plain class, not a dataclass: one is made per call, and mypyc would
    # give a dataclass its interpreted __init__ (emqd/commit/plan.py's Plan says more).
    __slots__ = ("keys", "lease_ms", "count", "block", "config", "holder", "with_trace")

    def __init__(
            self, keys: QueueKeys, lease_ms: int, count: int | None, block: int | None,
            config: Config) -> None:
        self.keys = keys
        self.lease_ms = lease_ms
        self.count = count
        self.block = block
        self.config = config
        self.holder = b""  # with_holder: a named connection's id
        self.with_trace = False  # WITHTRACE: each job's reply carries its trace context


def with_holder(args: ClaimArgs, holder: bytes) -> ClaimArgs:
    args.holder = holder
    return args


def parse(argv: list[bytes], config: Config) -> ClaimArgs:
    keys = queue_keys(parse_args.queue_name(argv[1]))
    lease_ms = parse_args.positive(argv[2], "LEASE_MS")
    if len(argv) == 3:
        return ClaimArgs(keys, lease_ms, None, None, config)
    opts = parse_args.options(argv, 3, _KEYWORDS, _FLAGS)
    count = opts.get(b"COUNT")
    block = opts.get(b"BLOCK")
    args = ClaimArgs(
        keys=keys,
        lease_ms=lease_ms,
        count=None if count is None else parse_args.positive_capped(count, "COUNT", MAX_COUNT),
        block=None if block is None else parse_args.non_negative(block, "BLOCK"),
        config=config,
    )
    args.with_trace = b"WITHTRACE" in opts
    return args


def plan(args: ClaimArgs, view: View, now_ms: int, run_id: bytes) -> Plan | Block:
    keys = args.keys
    deadline = now_ms + args.lease_ms
    if deadline > MAX_TIME_MS:
        raise errors.invalid_time("LEASE_MS", NAME)
    if args.block is not None and now_ms + args.block > MAX_TIME_MS:
        raise errors.TIMEOUT_RANGE()
    # Every key the plan may write is read first, for its type: a hash at
    # `active` must refuse the claim now rather than break the plan halfway.
    meta = view.hash(keys.meta)
    view.check_zset(keys.active)
    pending = view.zset(keys.pending)
    ring = view.zset(keys.ring)  # absent: no servable lane
    if meta is not None and is_paused(hashes.get(meta, PAUSED)):
        return _answer(args, [], [])
    want = args.count or 1
    window = None
    if meta is not None and hashes.has(meta, rates.MAX):  # the queue has a rate limit
        window = _window(view, keys, meta, now_ms)
        if window.free <= 0:
            return _answer(args, [], [], wake_at=window.frees_at())
        want = min(want, window.free)
    if ring is not None:
        if want == 1 and window is None:
            turn = lanes.serve_one(view, keys, args.config, ring, meta, judge)
            if turn is not None:
                return _lane_one(args, view, turn, now_ms, deadline, run_id)
        return round_robin(args, view, want, window, now_ms, run_id)
    members: Iterator[bytes] = iter(()) if pending is None else pending.members()
    taken, jobs, corrupt = _walk(view, keys, members, want)
    if len(jobs) == 1 and len(taken) == 1 and window is None:
        return _one(args, view, jobs[0], now_ms, deadline, run_id)
    return general(args, view, (taken, jobs, corrupt), window, now_ms, run_id)


def general(args: ClaimArgs, view: View, walked: Walked, window: rates.Window | None,
            now_ms: int, run_id: bytes) -> Plan | Block:
    """A flat queue in general, from what the walk of `pending` found (_walk): what the
    one-job fast path (_one, the ONE and ONE_HELD Shapes) must plan alike wherever it
    answers (tests/verbs/test_claim.py)."""
    taken, jobs, corrupt = walked
    removed = [(b"ZREM", args.keys.pending, *taken)] if taken else []
    cut_off = len(taken) - len(jobs) >= MAX_SKIPPED
    return _verdict(args, view, removed, jobs, corrupt, now_ms, run_id, None, window, cut_off)


def round_robin(args: ClaimArgs, view: View, want: int, window: rates.Window | None,
                now_ms: int, run_id: bytes) -> Plan | Block:
    """A queue with a ring, in general: lanes.serve's turns and lanes.settle's moves. What
    the lanes' fast path (lanes.serve_one, _lane_one) must plan alike where it answers
    (tests/verbs/test_lanes_fast.py)."""
    served = lanes.serve(view, args.keys, want, args.config, judge, now_ms, MAX_SKIPPED)
    removed: list[Op] = [(b"ZREM", key, *members) for key, members in served.taken.items()]
    return _verdict(args, view, removed, served.jobs, served.corrupt, now_ms, run_id,
                    served.ledger, window, served.cut_off)


def _window(view: View, keys: QueueKeys, meta: Hash, now_ms: int) -> rates.Window:
    rate = rates.queue_rate(meta, keys.queue)
    assert rate is not None  # the caller saw `rate_max`
    view.check_zset(keys.rate_log)
    return rates.Window(view, keys.rate_log, rate, now_ms)


Walked = tuple[list[bytes], list[tuple[bytes, Hash, int]], list[tuple[bytes, bytes]]]


def _walk(view: View, keys: QueueKeys, members: Iterator[bytes], want: int) -> Walked:
    """Members taken off pending, the claimable (id, row, token), the corrupt (id, text).

    Stops at `want` jobs, or once MAX_SKIPPED members were skipped.
    """
    taken: list[bytes] = []
    jobs: list[tuple[bytes, Hash, int]] = []
    corrupt: list[tuple[bytes, bytes]] = []
    skipped = 0
    for member in members:
        taken.append(member)
        row = view.hash(keys.job(member))
        if row is not None:
            token = judge(row)
            if isinstance(token, int):  # else the text of what is wrong with the row
                jobs.append((member, row, token))
                if len(jobs) == want:
                    break
                continue
            corrupt.append((member, token))
        # else a ghost: removed from pending, listed nowhere
        skipped += 1
        if skipped == MAX_SKIPPED:
            break
    return taken, jobs, corrupt


def judge(row: Hash) -> int | bytes:
    """A waiting row's token (next `attempts`), or the HINCRBY text that dead-letters it.

    The one rule for every member CLAIM meets, flat or in a lane (lanes.serve).
    """
    try:
        token = incremented(hashes.get(row, job.ATTEMPTS), 1)
        incremented(hashes.get(row, job.FAILURES), 0)  # CLAIM replies with it as an integer
    except ReplyError as error:
        return error.message
    return token


def _claimed(args: ClaimArgs, job_id: bytes, row: Hash, token: bytes,
             now: int) -> tuple[Any, ...]:
    """The reply row of one job (with WITHTRACE, its trace context fifth) and its `claimed`
    event."""
    failures = hashes.get(row, job.FAILURES)
    ready = parse_int(hashes.get(row, job.READY_MS) or hashes.get(row, job.CREATED_MS) or b"")
    extra = {"token": token, "wait_ms": now - ready if ready is not None else 0}
    reply = [job_id, token, hashes.get(row, job.PAYLOAD), int(failures or 0)]
    if args.with_trace:
        reply.append(hashes.get(row, job.TRACE))
    return reply, (events.CLAIMED, args.keys.queue, job_id, now, extra)


def _one(args: ClaimArgs, view: View, found: tuple[bytes, Hash, int], now: int, deadline: int,
         run_id: bytes) -> Plan:
    """The fast path: one flat job, nothing skipped, from a template."""
    keys = args.keys
    job_id, row, number = found
    token = decimal(number)
    reply, event = _claimed(args, job_id, row, token, now)
    holder = args.holder
    if holder:
        ops = ONE_HELD.ops(keys.pending, job_id, keys.job(job_id), token, run_id, ms_text(now),
                           holder, keys.active, ms_text(deadline))
        one = ONE_HELD
    else:
        ops = ONE.ops(keys.pending, job_id, keys.job(job_id), token, run_id, ms_text(now),
                      keys.active, ms_text(deadline))
        one = ONE
    shape: Shape | None = one
    if number > 1:  # a row that held a token already: the floor may rise (tokens.py)
        shape = _raise_floor(view, keys, number, ops, one)
    return Plan(ops, reply if args.count is None else [reply], [event],
                ((LEASED, keys.queue, deadline),), shape)


def _raise_floor(view: View, keys: QueueKeys, token: int, ops: list[Op],
                 shape: Shape | None) -> Shape | None:
    """Add the write of `meta.token_floor` to `ops` when `token` is above it; the plan's
    Shape, which no longer describes its ops then."""
    raised = tokens.raised(view, keys, token)
    if raised is None:
        return shape
    ops.append(raised)
    return None


def _lane_one(args: ClaimArgs, view: View, turn: lanes.Turn, now: int, deadline: int,
              run_id: bytes) -> Plan:
    """The lanes' fast path: one job from the ring's head lane, from a template."""
    keys = args.keys
    job_id, group = turn.job_id, turn.group
    token = decimal(turn.token)
    reply, event = _claimed(args, job_id, turn.row, token, now)
    values = [turn.lane_key, job_id, turn.row_key, token, run_id, ms_text(now)]
    if args.holder:
        values.append(args.holder)
    values += [keys.active, ms_text(deadline), keys.gactive, group, b"%d" % turn.running,
               keys.ring]
    if turn.rr is not None:
        values.append(b"%d" % turn.rr)
    values += [keys.meta, b"%d" % turn.lanes_pending]
    shape = LANE_SHAPES[(turn.rr is not None, bool(args.holder))]
    ops = shape.ops(*values)
    planned: Shape | None = shape
    if turn.token > 1:  # a row that held a token already: the floor may rise (tokens.py)
        planned = _raise_floor(view, keys, turn.token, ops, shape)
    return Plan(ops, reply if args.count is None else [reply], [event],
                ((LEASED, keys.queue, deadline),), planned)


def _verdict(args: ClaimArgs, view: View, removed: list[Op], jobs: list[Any], corrupt: list[Any],
             now: int, run_id: bytes, ledger: lanes.Ledger | None,
             window: rates.Window | None, cut_off: bool) -> Plan | Block:
    keys = args.keys
    ops = list(removed)
    replies = []
    happened = []
    deadline = now + args.lease_ms
    zadd: list[Any] = [b"ZADD", keys.active]
    for job_id, row, number in jobs:
        token = decimal(number)
        stamp: tuple[bytes, ...] = (job.ATTEMPTS, token, job.STATE, job.ACTIVE,
                                    job.LEASE_EPOCH, run_id, job.CLAIMED_MS, ms_text(now))
        if args.holder:
            stamp += (job.HOLDER, args.holder)
        ops.append((b"HSET", keys.job(job_id), *stamp))
        zadd += [deadline, job_id]
        reply, event = _claimed(args, job_id, row, token, now)
        replies.append(reply)
        happened.append(event)
        if window is not None:
            window.take(rates.claim_member(job_id, token))
    if jobs:
        ops.append(tuple(zadd))
        top = max(number for _, _, number in jobs)
        if top > 1:  # a row that held a token already: the floor may rise (tokens.py)
            _raise_floor(view, keys, top, ops, None)
    due: list[Due] = []
    if corrupt:
        if ledger is None:
            ledger = lanes.Ledger(view, keys, args.config, now)
        ops += _dead_letters(args, view, corrupt, jobs, now, ledger, happened, due)
    if window is not None:
        ops += window.ops()
    if ledger is not None:
        ops += lanes.settle(ledger)
        due += ledger.due
    if jobs:
        due.append((LEASED, keys.queue, deadline))
    return _answer(args, replies, ops, happened, tuple(due), cut_off=cut_off)


def _dead_letters(args: ClaimArgs, view: View, corrupt: list[Any], jobs: list[Any], now: int,
                  ledger: lanes.Ledger, happened: list[Any], due: list[Due]) -> list[Op]:
    """The rows CLAIM dead-letters (a counter HINCRBY would refuse), with what they are tied to."""
    keys = args.keys
    settings = queue_settings.of_queue(view, keys, args.config)
    busy = [member for member, _ in corrupt] + [j[0] for j in jobs]
    end = ties.Ending(view, keys, args.config, now, ledger, busy, job.DEAD, settings)
    for member, text in corrupt:
        end.ops.append(job.dead_row_op(keys, member, now, (job.LAST_ERROR, text)))
        end.happened.append((events.DEAD, keys.queue, member, now, {"error": text}))
        end.died(member, view.hash(keys.job(member)))
    ops = end.finish(settle=False)  # the caller settles, after its rate window's ops
    happened += end.happened
    due += end.due
    return ops


def _answer(args: ClaimArgs, jobs: list[Any], ops: list[Op], happened: list[Any] | None = None,
            due: tuple[Due, ...] = (), wake_at: int | None = None,
            cut_off: bool = False) -> Plan | Block:
    """The reply (or the park), with the plan of what was claimed and skipped.

    `wake_at`: the queue's rate limit holds the claim until then (a parked
    client is run again at that time). A walk cut off by MAX_SKIPPED answers
    even when it found nothing: parked, the client would be woken at once by
    its own plan's write to `pending` and walk again in the same loop
    iteration, which is the stall the bound avoids."""
    keys = args.keys
    if args.count is None:
        reply: Any = jobs[0] if jobs else NULL_ARRAY
    else:
        reply = jobs
    if jobs or args.block is None or cut_off:
        return Plan(ops, reply, happened, due)
    return Block(
        (keys.pending, keys.ring, keys.meta),
        args.block,
        reply,
        Plan(ops, None, happened, due) if ops else None,
        wake_at,
    )


COMMANDS: Final = [
    verb_command(NAME, -3, "write blocking", sys.modules[__name__],
                 summary="Lease jobs from the front of a queue")
]
