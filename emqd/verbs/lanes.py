"""Lanes (protocol section 8): per-group fairness and concurrency limits, in one place.

A job added with `GROUP g` waits in its lane `p.."lane:"..g` (scored like
`pending`) instead of `pending`. The bookkeeping around the lanes:

- `p.."gactive"`: group -> how many of its jobs are active; a field is deleted
  when it reaches 0.
- `p.."glimit"`: group -> its own limit (EMQ.LANE.LIMIT); absent means the
  queue's `lane_limit` setting; 0 means no limit.
- `p.."ring"`: the members CLAIM can serve now, in turn order. A lane `g` is a
  member exactly when `lane:g` is not empty and it has a free slot (limit 0,
  or gactive < limit). The flat queue is the member `""` exactly when
  `pending` is not empty *and* at least one lane is a member: a queue with no
  servable lane has no ring at all, and CLAIM then serves `pending` directly,
  as it did before lanes existed (one read more: the ring's head or size).
- `meta.rr`: the ring's turn counter. A member that enters the ring, or that
  CLAIM has just served and that can still be served, gets the score
  `rr + 1` (the back of the ring): the effect of `HINCRBY meta rr 1` per turn.
- `meta.lanes_pending`: how many jobs wait in all lanes together, so that
  EMQ.STATS answers in O(1) whatever the number of lanes. Every plan that
  moves jobs into or out of lanes writes the new total.
- Counters are written as resolved values (`HSET gactive g n`, `HSET meta rr
  n lanes_pending m`: the log holds effects, and HSET costs less than
  HINCRBY to apply), and a gactive field that reaches 0 is deleted (`HDEL`).

How a verb uses this module: it notes what its plan does to waiting and
active jobs on a `Ledger` (`enter`, `leave_waiting`, `leave_active`, or
CLAIM's `serve`), then asks `settle(ledger)` for the ops that keep all of the
above exact, in the same plan. Like `decide`, `settle` and `serve` return a
`Need` when a read is missing; they read nothing themselves and write
nothing, and every stored value they depend on (`gactive`, `glimit`, `rr`,
`lanes_pending`) is validated before the plan is built, so that applying it
cannot fail halfway. A flat job costs nothing here unless the queue has a
ring (`settle` then reads the ring's size and stops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from emqd import errors
from emqd.config import Config
from emqd.keys import QueueKeys
from emqd.numbers import INT64_MAX, parse_int
from emqd.plan import Op
from emqd.store.hash import incremented
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import HGET, HGETALL, ZCARD, ZHEAD, ZSCORE, Need, Reads, need

GROUP = b"group"  # the row field naming a job's lane
FLAT = b""  # the flat queue's member in the ring
RR = b"rr"  # meta field: the ring's turn counter
LANES_PENDING = b"lanes_pending"  # meta field: jobs waiting in all lanes together


def group_of(row: dict | None) -> bytes | None:
    """The lane a row belongs to, or None for a flat job."""
    if row is None:
        return None
    return row.get(GROUP) or None


def waiting_key(keys: QueueKeys, group: bytes | None) -> bytes:
    """Where a waiting job sits: its lane, or `pending`."""
    return keys.pending if group is None else keys.lane(group)


def lane_reads(keys: QueueKeys, group: bytes) -> tuple[tuple, ...]:
    """What `settle` and `serve` must see of one lane."""
    return (
        (ZCARD, keys.lane(group)),
        (HGET, keys.gactive, group),
        (HGET, keys.glimit, group),
        (ZSCORE, keys.ring, group),
    )


def parse_limit(raw: bytes) -> int | None:
    """A lane limit as stored: a non-negative integer, else None."""
    value = parse_int(raw)
    return value if value is not None and value >= 0 else None


class Ledger:
    """What one plan does to the flat queue and the lanes, noted as the verb decides.

    `flat` and `waiting` count jobs entering (+) and leaving (-) `pending` and
    each lane; `active` counts lane jobs entering and leaving `active`;
    `placed` holds the ring members CLAIM has already moved (score) or taken
    out (None). Groups are kept in the order they were first touched, so the
    ring order of lanes entering together follows the plan.
    """

    __slots__ = ("keys", "config", "flat", "waiting", "active", "placed", "known", "rr",
                 "limits", "queue_limit")

    def __init__(self, keys: QueueKeys, config: Config) -> None:
        self.keys = keys
        self.config = config
        self.flat = 0
        self.waiting: dict[bytes, int] = {}
        self.active: dict[bytes, int] = {}
        self.placed: dict[bytes, int | None] = {}
        self.known: dict[bytes, bool] = {}  # ring membership before the plan, where known
        self.rr: int | None = None
        self.limits: dict[bytes, int] = {}  # each lane's limit once known, or set by the plan
        self.queue_limit: int | None = None  # the queue's lane_limit this plan sets (CONFIG)

    # --- what the verbs note --------------------------------------------------------
    def enter(self, group: bytes | None) -> None:
        """A job starts waiting (ADD, REQUEUE, recovery, PROMOTE, REVIVE)."""
        if group is None:
            self.flat += 1
        else:
            self.waiting[group] = self.waiting.get(group, 0) + 1
            self.active.setdefault(group, 0)

    def leave_waiting(self, group: bytes | None) -> None:
        """A waiting job goes (CLAIM takes it or skips it, REMOVE deletes it)."""
        if group is None:
            self.flat -= 1
        else:
            self.waiting[group] = self.waiting.get(group, 0) - 1
            self.active.setdefault(group, 0)

    def leave_active(self, group: bytes | None) -> None:
        """A lane job leaves `active`: its slot is given back."""
        if group is not None:
            self.active[group] = self.active.get(group, 0) - 1
            self.waiting.setdefault(group, 0)

    def set_limit(self, group: bytes, limit: int) -> None:
        """The plan writes `glimit[group] = limit` (0: no limit)."""
        self.limits[group] = limit
        self.waiting.setdefault(group, 0)

    def claimed(self, group: bytes | None) -> None:
        """CLAIM made a waiting job active."""
        self.leave_waiting(group)
        if group is not None:
            self.active[group] += 1

    # --- the lanes' state after what was noted (the reads must be present) -------
    def size(self, group: bytes, reads: Reads) -> int:
        return reads[(ZCARD, self.keys.lane(group))] + self.waiting.get(group, 0)

    def running(self, group: bytes, reads: Reads) -> int:
        """gactive after the plan; a stored value HINCRBY would refuse refuses the verb."""
        stored = reads[(HGET, self.keys.gactive, group)]
        return max(incremented(stored, self.active.get(group, 0)), 0)

    def limit(self, group: bytes, reads: Reads) -> int:
        value = self.limits.get(group)
        if value is not None:
            return value
        raw = reads[(HGET, self.keys.glimit, group)]
        if raw is None:
            if self.queue_limit is None:
                self.queue_limit = _queue_limit(self.keys, self.config, reads)
            value = self.queue_limit
        else:
            value = parse_limit(raw)
            if value is None:
                raise errors.corrupt_lane_limit(group)
        self.limits[group] = value
        return value

    def servable(self, group: bytes, reads: Reads) -> bool:
        if self.size(group, reads) <= 0:
            return False
        limit = self.limit(group, reads)
        return limit == 0 or self.running(group, reads) < limit

    def was_in(self, member: bytes, reads: Reads) -> bool:
        """Whether `member` was in the ring before the plan."""
        known = self.known.get(member)
        if known is not None:
            return known
        return reads[(ZSCORE, self.keys.ring, member)] is not None

    def in_ring(self, member: bytes, reads: Reads) -> bool:
        """Whether `member` is in the ring after the moves placed so far."""
        if member in self.placed:
            return self.placed[member] is not None
        return self.was_in(member, reads)

    def to_back(self, member: bytes, reads: Reads) -> None:
        """Place `member` at the back of the ring: score `rr + 1`."""
        if self.rr is None:
            self.rr = incremented(_meta(self.keys, reads).get(RR), 0)
        if self.rr >= INT64_MAX:
            raise errors.OVERFLOW()  # HINCRBY's refusal, before anything is written
        self.rr += 1
        self.placed[member] = self.rr

    def take_out(self, member: bytes) -> None:
        self.placed[member] = None


def retune(keys: QueueKeys, config: Config, queue_limit: int, reads: Reads) -> Need | list[Op]:
    """The ring ops for a new queue `lane_limit` (EMQ.CONFIG SET), in the same plan.

    Only a lane with active jobs can change from servable to full or back (a lane
    with none has a free slot under any limit), so the lanes visited are the
    fields of `gactive`: O(lanes with active jobs), never all lanes.
    """
    active_read = (HGETALL, keys.gactive)
    if active_read not in reads:
        return need(active_read)
    ledger = Ledger(keys, config)
    ledger.queue_limit = queue_limit
    for group in reads[active_read] or ():
        ledger.waiting.setdefault(group, 0)  # touched: settle looks at it again
    return settle(ledger, reads)


def _queue_limit(keys: QueueKeys, config: Config, reads: Reads) -> int:
    """The queue's `lane_limit` setting (only that field is read: it is all lanes need)."""
    raw = (reads[queue_settings.settings_read(keys.config)] or {}).get(b"lane_limit")
    if raw is None:
        return config.lane_limit
    value = parse_limit(raw)
    if value is None:
        raise errors.corrupt_setting(b"lane_limit")
    return value


def _meta(keys: QueueKeys, reads: Reads) -> dict:
    return reads[(HGETALL, keys.meta)] or {}


def _core_reads(keys: QueueKeys) -> tuple[tuple, ...]:
    """What settling any lane move reads besides the lanes themselves."""
    return ((ZCARD, keys.ring), (HGETALL, keys.meta), queue_settings.settings_read(keys.config))


def _flat_reads(keys: QueueKeys) -> tuple[tuple, ...]:
    """What settling the flat member reads, when a move can change it (see `_settle_flat`)."""
    return ((ZSCORE, keys.ring, FLAT), (ZCARD, keys.pending))


def _base_reads(keys: QueueKeys) -> tuple[tuple, ...]:
    return (*_core_reads(keys), *_flat_reads(keys))


def prefetch(keys: QueueKeys, row: dict | None) -> tuple[tuple, ...]:
    """The reads `settle` will ask for when `row`'s job moves: a verb that knows the row
    early names them as `ahead` of its own next reads (runner.py), saving the runner a
    round. () for a flat job."""
    return prefetch_group(keys, group_of(row))


def prefetch_rows(keys: QueueKeys, rows: list) -> tuple[tuple, ...]:
    """`prefetch` for several rows (a sweep, a promotion), each lane once."""
    groups = {group for row in rows if (group := group_of(row)) is not None}
    if not groups:
        return ()
    return (*_core_reads(keys), *(read for group in groups for read in lane_reads(keys, group)))


def also(step: Need, keys: QueueKeys, row: dict | None) -> Need:
    """`step` with `prefetch(row)` read ahead."""
    early = prefetch(keys, row)
    return Need(step.reads, step.ahead + early) if early else step


def prefetch_group(keys: QueueKeys, group: bytes | None) -> tuple[tuple, ...]:
    """`prefetch` for a job of `group` (None: flat, nothing to read)."""
    if group is None:
        return ()
    return (*_core_reads(keys), *lane_reads(keys, group))


def settle(ledger: Ledger, reads: Reads) -> Need | list[Op]:
    """The ops that keep gactive, the ring, `rr` and `lanes_pending` exact after the plan."""
    keys = ledger.keys
    if not ledger.waiting and not ledger.placed:
        if not ledger.flat:
            return []
        card_read = (ZCARD, keys.ring)
        if card_read not in reads:
            return need(card_read)
        if not reads[card_read]:
            return []  # no servable lane: no ring, and pending is served directly
    try:  # the reads are usually all there (asked ahead): look first, list them if not
        return _settled(ledger, reads)
    except KeyError:
        missing = [read for read in _settle_reads(ledger) if read not in reads]
        if not missing:
            raise
        return need(*missing)


def _groups(ledger: Ledger) -> list[bytes]:
    if not ledger.placed:
        return list(ledger.waiting)
    return list(dict.fromkeys([*ledger.waiting, *(m for m in ledger.placed if m != FLAT)]))


def _settle_reads(ledger: Ledger) -> list[tuple]:
    keys = ledger.keys
    wanted = list(_base_reads(keys))
    for group in _groups(ledger):
        wanted += lane_reads(keys, group)[: 3 if group in ledger.known else 4]
    return wanted


def _settled(ledger: Ledger, reads: Reads) -> list[Op]:
    """`settle` with every read present (a missing one raises KeyError)."""
    keys = ledger.keys
    ops: list[Op] = []
    set_active: list = []
    drop_active: list[bytes] = []
    entered = left = 0
    for group in _groups(ledger):
        was_in = ledger.was_in(group, reads)
        if group in ledger.placed:
            now_in = ledger.placed[group] is not None
        else:
            now_in = ledger.servable(group, reads)
            if now_in != was_in:
                if now_in:
                    ledger.to_back(group, reads)
                else:
                    ledger.take_out(group)
        if now_in != was_in:
            entered += now_in
            left += was_in
        if ledger.active.get(group):
            running = ledger.running(group, reads)
            if running:
                set_active += [group, b"%d" % running]
            elif reads[(HGET, keys.gactive, group)] is not None:
                drop_active.append(group)
    _settle_flat(ledger, reads, entered, left)
    if set_active:
        ops.append((b"HSET", keys.gactive, *set_active))
    if drop_active:
        ops.append((b"HDEL", keys.gactive, *drop_active))
    if ledger.placed:
        ops += _ring_ops(ledger, reads)
    meta_fields: list = []
    meta = _meta(keys, reads)
    if ledger.rr is not None:
        incremented(meta.get(RR), 0)  # a corrupt rr refuses (to_back read it the same way)
        meta_fields += [RR, b"%d" % ledger.rr]
    waiting = sum(ledger.waiting.values())
    if waiting:
        meta_fields += [LANES_PENDING, b"%d" % incremented(meta.get(LANES_PENDING), waiting)]
    if meta_fields:
        ops.append((b"HSET", keys.meta, *meta_fields))
    return ops


def _settle_flat(ledger: Ledger, reads: Reads, entered: int, left: int) -> None:
    """Place the flat member: in the ring when pending is not empty and a lane is in it.

    Reads only what can change the answer: when pending's size is unchanged and
    lanes stay in the ring whatever the flat member's own state (at least one
    of the ring's other members is a lane that stays), it stays as it is.
    """
    keys = ledger.keys
    ring_size = reads[(ZCARD, keys.ring)]
    if (ring_size - 1 + entered - left > 0 and not ledger.flat
            and FLAT not in ledger.placed):
        return  # a lane stays in the ring and pending is unchanged: already right
    lanes_after = ring_size - ledger.was_in(FLAT, reads) + entered - left if ring_size else entered
    wanted = lanes_after > 0 and reads[(ZCARD, keys.pending)] + ledger.flat > 0
    if wanted != ledger.in_ring(FLAT, reads):
        if wanted:
            ledger.to_back(FLAT, reads)
        else:
            ledger.take_out(FLAT)


def _ring_ops(ledger: Ledger, reads: Reads) -> list[Op]:
    ring = ledger.keys.ring
    out = [m for m, score in ledger.placed.items() if score is None and ledger.was_in(m, reads)]
    into: list = []
    for member, score in ledger.placed.items():
        if score is not None:
            into += [score, member]
    ops: list[Op] = []
    if out:
        ops.append((b"ZREM", ring, *out))
    if into:
        ops.append((b"ZADD", ring, *into))
    return ops


# --- CLAIM's round-robin ----------------------------------------------------------------
@dataclass(slots=True)
class Served:
    """What CLAIM's turn round the ring found.

    `taken`: waiting set -> members removed from it (jobs, ghosts, corrupt
    rows); `jobs`: (id, row, token) to hand out, in turn order; `corrupt`: (id,
    HINCRBY's text) to dead-letter; `ledger`: the moves, ready for `settle`.
    """

    taken: dict[bytes, list[bytes]]
    jobs: list[tuple[bytes, dict, int]]
    corrupt: list[tuple[bytes, bytes]]
    ledger: Ledger


def _deepest(reads: Reads, key: bytes, start: int) -> tuple[int, list] | None:
    """The deepest (ZHEAD key d) read present, d = start * 2^k; None if there is none.

    Every head read of one call starts at the same depth and doubles, so the
    reads present form an unbroken ladder from `start`.
    """
    depth = start
    found = None
    while (ZHEAD, key, depth) in reads:
        found = (depth, reads[(ZHEAD, key, depth)])
        depth *= 2
    return found


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def ring_head_depth(want: int) -> int:
    """How much of the ring's head CLAIM reads first (it asks with its first reads)."""
    return 1 if want == 1 else _pow2(want)


class _Source:
    """One ring member's waiting set, walked from the front (ghosts and corrupt rows skipped)."""

    __slots__ = ("group", "key", "depth", "cursor")

    def __init__(self, keys: QueueKeys, member: bytes, depth: int) -> None:
        self.group = member or None
        self.key = waiting_key(keys, self.group)
        self.depth = depth  # the first head read's depth (see `_prefetch`)
        self.cursor = 0


Judge = Callable[[dict], "int | bytes"]  # CLAIM's rule for a row: its token, or why it dies


def serve(keys: QueueKeys, want: int, reads: Reads, config: Config,
          judge: Judge) -> Need | Served:
    """Go round the ring job by job until `want` jobs are found or nothing is servable.

    Each turn takes the ring's lowest-score member, takes its front job, and
    moves the member to the back (`rr + 1`) or out of the ring when it became
    empty or full. A member that turns out empty or full when its turn comes
    (a plain write from a client) is taken out and skipped. Picking a member
    reads the ring's head only: O(log n) whatever the number of lanes. `judge`
    is CLAIM's own rule for each row met (claim.judge).
    """
    found = _deepest(reads, keys.ring, ring_head_depth(want))
    if found is None:
        return need((ZHEAD, keys.ring, ring_head_depth(want)))
    ring_depth, ring_head = found
    first = [member for member, _ in ring_head]
    depth = _pow2(-(-want // max(len(first), 1)))  # jobs a member is likely to give
    if (HGETALL, keys.meta) not in reads or _front_row_missing(keys, first[0], depth, reads):
        return need(*_prefetch(keys, first, depth, reads))  # the next batch, in one round
    try:  # the reads are usually all there: look first, list what is missing if not
        step = _turns(keys, want, reads, config, judge, first, ring_depth, depth)
    except KeyError:
        missing = _prefetch(keys, first, depth, reads)
        if not missing:
            raise
        return need(*missing)
    if type(step) is Need:  # a row or a deeper head: ask for the others with it
        return Need(step.reads, tuple(_prefetch(keys, first, depth, reads)))
    return step


def _front_row_missing(keys: QueueKeys, member: bytes, depth: int, reads: Reads) -> bool:
    """Whether the first member's front row is still unread (`_prefetch`'s second batch)."""
    head = reads.get((ZHEAD, waiting_key(keys, member or None), depth))
    return bool(head) and (HGETALL, keys.job(head[0][0])) not in reads


def _turns(keys: QueueKeys, want: int, reads: Reads, config: Config, judge: Judge,
           first: list[bytes], ring_depth: int, depth: int) -> Need | Served:
    """`serve`'s turns; a missing lane or base read raises KeyError."""
    ledger = Ledger(keys, config)
    for member in first:
        ledger.known[member] = True
    ring_size = reads[(ZCARD, keys.ring)]
    sources: dict[bytes, _Source] = {}
    turns: list[bytes] = []  # members moved to the back, in order: served after `first`
    taken: dict[bytes, list[bytes]] = {}
    jobs: list[tuple[bytes, dict, int]] = []
    corrupt: list[tuple[bytes, bytes]] = []
    index = back = 0
    while len(jobs) < want:
        if index < len(first):
            member = first[index]
            index += 1
        elif len(first) == ring_depth and ring_depth < ring_size:
            return need((ZHEAD, keys.ring, ring_depth * 2))
        elif back < len(turns):
            member = turns[back]
            back += 1
        else:
            break
        source = sources.get(member)
        if source is None:
            source = sources[member] = _Source(keys, member, depth)
        if source.group is not None:
            if not ledger.servable(source.group, reads):
                ledger.take_out(member)
                continue
        found = _next_job(keys, source, reads, ledger, judge, taken, corrupt)
        if type(found) is Need:
            return found
        if found is None:
            ledger.take_out(member)
            continue
        jobs.append(found)  # type: ignore[arg-type]
        ledger.claimed(source.group)
        if _still_servable(source, ledger, reads):
            ledger.to_back(member, reads)
            turns.append(member)
        else:
            ledger.take_out(member)
    return Served(taken, jobs, corrupt, ledger)


def _prefetch(keys: QueueKeys, first: list[bytes], depth: int, reads: Reads) -> list[tuple]:
    """The reads most turns will need, asked for at once (fewer rounds of the runner).

    A member's ring score is not read: it came from the ring's head.
    """
    wanted: list[tuple] = list(_base_reads(keys) if FLAT in first else _core_reads(keys))
    for member in first:
        group = member or None
        if group is not None:
            wanted += lane_reads(keys, group)[:3]
        wanted.append((ZHEAD, waiting_key(keys, group), depth))
    missing = [read for read in wanted if read not in reads]
    if missing:
        return missing
    rows = []
    for member in first:
        head = reads[(ZHEAD, waiting_key(keys, member or None), depth)]
        rows += [(HGETALL, keys.job(job_id)) for job_id, _ in head]
    return [read for read in rows if read not in reads]


def _still_servable(source: _Source, ledger: Ledger, reads: Reads) -> bool:
    if source.group is None:
        return reads[(ZCARD, ledger.keys.pending)] + ledger.flat > 0
    return ledger.servable(source.group, reads)


def _next_job(keys: QueueKeys, source: _Source, reads: Reads, ledger: Ledger, judge: Judge,
              taken: dict[bytes, list[bytes]], corrupt: list) -> Need | tuple | None:
    """The source's next claimable job (id, row, token), None when it ran out."""
    while True:
        found = _deepest(reads, source.key, source.depth)
        if found is None:
            return need((ZHEAD, source.key, source.depth))
        depth, head = found
        if source.cursor >= len(head):
            if len(head) < depth:
                return None
            return need((ZHEAD, source.key, depth * 2))
        job_id = head[source.cursor][0]
        row_read = (HGETALL, keys.job(job_id))
        if row_read not in reads:
            return need(row_read)
        source.cursor += 1
        taken.setdefault(source.key, []).append(job_id)
        row = reads[row_read]
        if row is None:
            ledger.leave_waiting(source.group)  # a ghost: removed, listed nowhere
            continue
        token = judge(row)
        if type(token) is bytes:
            ledger.leave_waiting(source.group)  # dead-lettered by CLAIM
            corrupt.append((job_id, token))
            continue
        return (job_id, row, token)
