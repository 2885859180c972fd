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
  as it did before lanes existed (one read more: the ring's size).
- `meta.rr`: the ring's turn counter. A member that enters the ring, or that
  CLAIM has just served and that can still be served, gets the score
  `rr + 1` (the back of the ring); the plan adds its turns to `rr` with one
  `HINCRBY meta rr k`.
- `meta.lanes_pending`: how many jobs wait in all lanes together, so that
  EMQ.STATS answers in O(1) whatever the number of lanes. Every plan that
  moves jobs into or out of lanes adds the difference (`HINCRBY`).
- gactive moves by `HINCRBY gactive g d`, and a field that reaches 0 is
  deleted (`HDEL`) instead.

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

from dataclasses import dataclass

from emqd import errors
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.keys import QueueKeys
from emqd.numbers import parse_int
from emqd.plan import Op
from emqd.store.hash import incremented
from emqd.verbs import settings as queue_settings
from emqd.verbs.runner import HGET, HGETALL, ZCARD, ZHEAD, ZSCORE, Need, Reads, need

GROUP = b"group"  # the row field naming a job's lane
FLAT = b""  # the flat queue's member in the ring
RR = b"rr"  # meta field: the ring's turn counter
LANES_PENDING = b"lanes_pending"  # meta field: jobs waiting in all lanes together
ATTEMPTS = b"attempts"
FAILURES = b"failures"


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

    __slots__ = ("keys", "config", "flat", "waiting", "active", "placed", "rr", "limits",
                 "queue_limit")

    def __init__(self, keys: QueueKeys, config: Config) -> None:
        self.keys = keys
        self.config = config
        self.flat = 0
        self.waiting: dict[bytes, int] = {}
        self.active: dict[bytes, int] = {}
        self.placed: dict[bytes, int | None] = {}
        self.rr: int | None = None
        self.limits: dict[bytes, int] = {}  # limits this plan sets (EMQ.LANE.LIMIT)
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
        if group in self.limits:
            return self.limits[group]
        raw = reads[(HGET, self.keys.glimit, group)]
        if raw is None:
            if self.queue_limit is not None:
                return self.queue_limit
            settings = queue_settings.from_reads(self.keys.config, reads, self.config)
            assert settings is not None  # settle and serve read the settings first
            return settings.lane_limit
        value = parse_limit(raw)
        if value is None:
            raise errors.corrupt_lane_limit(group)
        return value

    def servable(self, group: bytes, reads: Reads) -> bool:
        if self.size(group, reads) <= 0:
            return False
        limit = self.limit(group, reads)
        return limit == 0 or self.running(group, reads) < limit

    def in_ring(self, member: bytes, reads: Reads) -> bool:
        """Whether `member` is in the ring after the moves placed so far."""
        if member in self.placed:
            return self.placed[member] is not None
        return reads[(ZSCORE, self.keys.ring, member)] is not None

    def to_back(self, member: bytes, reads: Reads) -> None:
        """Place `member` at the back of the ring: score `rr + 1`."""
        if self.rr is None:
            self.rr = incremented(reads[(HGET, self.keys.meta, RR)], 0)
        self.rr = incremented(b"%d" % self.rr, 1)
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


def _base_reads(keys: QueueKeys) -> tuple[tuple, ...]:
    return (
        (ZCARD, keys.ring),
        (ZSCORE, keys.ring, FLAT),
        (ZCARD, keys.pending),
        (HGET, keys.meta, RR),
        (HGET, keys.meta, LANES_PENDING),
        queue_settings.settings_read(keys.config),
    )


def settle(ledger: Ledger, reads: Reads) -> Need | list[Op]:
    """The ops that keep gactive, the ring, `rr` and `lanes_pending` exact after the plan."""
    keys = ledger.keys
    groups = list(dict.fromkeys([*ledger.waiting, *(m for m in ledger.placed if m != FLAT)]))
    if not groups and not ledger.placed:
        if not ledger.flat:
            return []
        card_read = (ZCARD, keys.ring)
        if card_read not in reads:
            return need(card_read)
        if not reads[card_read]:
            return []  # no servable lane: no ring, and pending is served directly
    wanted = list(_base_reads(keys))
    for group in groups:
        wanted += lane_reads(keys, group)
    missing = [read for read in wanted if read not in reads]
    if missing:
        return need(*missing)
    ops: list[Op] = []
    drop_active: list[bytes] = []
    lanes_before = reads[(ZCARD, keys.ring)] - (reads[(ZSCORE, keys.ring, FLAT)] is not None)
    lanes_after = lanes_before
    for group in groups:
        was_in = reads[(ZSCORE, keys.ring, group)] is not None
        if group not in ledger.placed:
            servable = ledger.servable(group, reads)
            if servable and not was_in:
                ledger.to_back(group, reads)
            elif not servable and was_in:
                ledger.take_out(group)
        lanes_after += ledger.in_ring(group, reads) - was_in
        moved = ledger.active.get(group)
        if moved:
            if ledger.running(group, reads):
                ops.append((b"HINCRBY", keys.gactive, group, moved))
            elif reads[(HGET, keys.gactive, group)] is not None:
                drop_active.append(group)
    flat_wanted = reads[(ZCARD, keys.pending)] + ledger.flat > 0 and lanes_after > 0
    if flat_wanted != ledger.in_ring(FLAT, reads):
        if flat_wanted:
            ledger.to_back(FLAT, reads)
        else:
            ledger.take_out(FLAT)
    if drop_active:
        ops.append((b"HDEL", keys.gactive, *drop_active))
    ops += _ring_ops(ledger, reads)
    if ledger.rr is not None:
        turns = ledger.rr - incremented(reads[(HGET, keys.meta, RR)], 0)
        ops.append((b"HINCRBY", keys.meta, RR, turns))
    waiting = sum(ledger.waiting.values())
    if waiting:
        incremented(reads[(HGET, keys.meta, LANES_PENDING)], waiting)  # refuses a corrupt one
        ops.append((b"HINCRBY", keys.meta, LANES_PENDING, waiting))
    return ops


def _ring_ops(ledger: Ledger, reads: Reads) -> list[Op]:
    ring = ledger.keys.ring
    out = [m for m, score in ledger.placed.items()
           if score is None and reads.get((ZSCORE, ring, m)) is not None]
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
    return 1 << max(n - 1, 0).bit_length()


class _Source:
    """One ring member's waiting set, walked from the front (ghosts and corrupt rows skipped)."""

    __slots__ = ("group", "key", "depth", "cursor")

    def __init__(self, keys: QueueKeys, member: bytes, depth: int) -> None:
        self.group = member or None
        self.key = waiting_key(keys, self.group)
        self.depth = depth  # the first head read's depth (see `_prefetch`)
        self.cursor = 0


def serve(keys: QueueKeys, want: int, reads: Reads, config: Config) -> Need | Served:
    """Go round the ring job by job until `want` jobs are found or nothing is servable.

    Each turn takes the ring's lowest-score member, takes its front job, and
    moves the member to the back (`rr + 1`) or out of the ring when it became
    empty or full. A member that turns out empty or full when its turn comes
    (a plain write from a client) is taken out and skipped. Picking a member
    reads the ring's head only: O(log n) whatever the number of lanes.
    """
    base = _base_reads(keys)
    ring_start = _pow2(want)
    ring_head_read = (ZHEAD, keys.ring, ring_start)
    missing = [read for read in (*base, ring_head_read) if read not in reads]
    if missing:
        return need(*missing)
    ring_depth, ring_head = _deepest(reads, keys.ring, ring_start)  # type: ignore[misc]
    first = [member for member, _ in ring_head]
    depth = _pow2(-(-want // max(len(first), 1)))  # jobs a member is likely to give
    prefetch = _prefetch(keys, first, depth, reads)
    if prefetch:
        return need(*prefetch)
    ledger = Ledger(keys, config)
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
            missing = [read for read in lane_reads(keys, source.group) if read not in reads]
            if missing:
                return need(*missing)
            if not ledger.servable(source.group, reads):
                ledger.take_out(member)
                continue
        found = _next_job(keys, source, reads, ledger, taken, corrupt)
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
    """The reads most turns will need, asked for at once (fewer rounds of the runner)."""
    wanted: list[tuple] = []
    for member in first:
        group = member or None
        if group is not None:
            wanted += lane_reads(keys, group)
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


def _next_job(keys: QueueKeys, source: _Source, reads: Reads, ledger: Ledger,
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
        try:
            token = incremented(row.get(ATTEMPTS), 1)
            incremented(row.get(FAILURES), 0)  # CLAIM replies with it as an integer
        except ReplyError as error:
            ledger.leave_waiting(source.group)  # dead-lettered by CLAIM
            corrupt.append((job_id, error.message))
            continue
        return (job_id, row, token)
