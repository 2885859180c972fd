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
- `p.."grate"`: group -> its rate limit (EMQ.LANE.RATE, rules/rates.py). A
  lane whose window is full cannot be served now either: it is out of the
  ring like a full lane, and waits in `p.."rated"` (group -> when its window
  has room) for housekeeping to put it back. The plan that fills a window
  (CLAIM) or makes it full (LANE.RATE) enters it there; `grate` is read only
  when a lane is looked at, so flat jobs never pay for it.
- Counters are written as resolved values (`HSET gactive g n`, `HSET meta rr
  n lanes_pending m`: the log holds effects, and HSET costs less than
  HINCRBY to apply), and a gactive field that reaches 0 is deleted (`HDEL`).

How a verb uses this module: it notes what its plan does to waiting and
active jobs on a `Ledger` (`enter`, `leave_waiting`, `leave_active`, or
CLAIM's `serve`), then asks `settle(ledger)` for the ops that keep all of the
above exact, in the same plan. The ledger reads the store (through the
planner's `View`) only when an answer needs it, and writes nothing; every
stored value the ops depend on (`gactive`, `glimit`, `rr`, `lanes_pending`)
is validated before the plan is built, so that applying it cannot fail
halfway. A flat job costs nothing here unless the queue has a ring (`settle`
then looks at the ring's size and stops).

The two commonest moves, CLAIM's turn for one job and the COMPLETE that gives
a slot back, are answered without the ledger (`serve_one`, `slot_back`, at
the end of this module) from a few reads, with exactly the values the ledger
would write; anything else goes through the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from emqd import errors
from emqd.commit.plan import RATED, Due, Op
from emqd.compat.numbers import INT64_MAX, parse_int
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.layout import QueueKeys
from emqd.rules import rates
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View
from emqd.store.zset import ZSet

GROUP: Final = b"group"  # the row field naming a job's lane
FLAT: Final = b""  # the flat queue's member in the ring
RR: Final = b"rr"  # meta field: the ring's turn counter
LANES_PENDING: Final = b"lanes_pending"  # meta field: jobs waiting in all lanes together
LANE_LIMIT: Final = b"lane_limit"  # the queue setting (settings.py) lanes read on their own


def group_of(row: Hash | None) -> bytes | None:
    """The lane a row belongs to, or None for a flat job."""
    if row is None:
        return None
    return hashes.get(row, GROUP) or None


def waiting_key(keys: QueueKeys, group: bytes | None) -> bytes:
    """Where a waiting job sits: its lane, or `pending`."""
    return keys.pending if group is None else keys.lane(group)


def parse_limit(raw: bytes) -> int | None:
    """A lane limit as stored: a non-negative integer, else None."""
    value = parse_int(raw)
    return value if value is not None and value >= 0 else None



class LaneRates:
    """The lanes' rate limits as one plan sees them: made only when a lane is looked at, so
    that a plan of the flat queue (nearly every COMPLETE) builds none of it."""

    __slots__ = ("table", "written", "windows", "due")

    def __init__(self, table: Hash | None) -> None:
        self.table = table  # `grate`
        self.written: dict[bytes, rates.Rate | None] = {}  # lane rates the plan writes
        self.windows: dict[bytes, rates.Window | None] = {}  # each lane's window, once looked at
        self.due: list[Due] = []  # lanes whose window this plan filled: when they have room


class Ledger:
    """What one plan does to the flat queue and the lanes, noted as the verb decides.

    `flat` and `waiting` count jobs entering (+) and leaving (-) `pending` and
    each lane; `active` counts lane jobs entering and leaving `active`;
    `placed` holds the ring members CLAIM has already moved (score) or taken
    out (None). Groups are kept in the order they were first touched, so the
    ring order of lanes entering together follows the plan. The store is read
    through `view` when an answer needs it.
    """

    __slots__ = ("view", "keys", "config", "now_ms", "flat", "waiting", "active", "placed",
                 "known", "rr", "limits", "queue_limit", "rated")

    def __init__(self, view: View, keys: QueueKeys, config: Config, now_ms: int) -> None:
        self.view = view
        self.keys = keys
        self.config = config
        self.now_ms = now_ms
        self.flat = 0
        self.waiting: dict[bytes, int] = {}
        self.active: dict[bytes, int] = {}
        self.placed: dict[bytes, int | None] = {}
        self.known: dict[bytes, bool] = {}  # ring membership before the plan, where known
        self.rr: int | None = None
        self.limits: dict[bytes, int] = {}  # each lane's limit once known, or set by the plan
        self.queue_limit: int | None = None  # the queue's lane_limit (CONFIG SET sets it)
        self.rated: LaneRates | None = None  # made when a lane's rate is first looked at

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

    def set_rate(self, group: bytes, rate: rates.Rate | None) -> None:
        """The plan writes lane `group`'s rate limit (None: it has none)."""
        lane_rates = self.lane_rates()
        lane_rates.written[group] = rate
        lane_rates.windows.pop(group, None)
        self.waiting.setdefault(group, 0)

    def claimed(self, group: bytes | None, member: bytes = b"") -> None:
        """CLAIM made a waiting job active (`member`: its entry in a lane's rate window)."""
        self.leave_waiting(group)
        if group is not None:
            self.active[group] += 1
            window = self.window(group)
            if window is not None:
                window.take(member)

    def lane_rates(self) -> LaneRates:
        if self.rated is None:
            self.rated = LaneRates(self.view.hash(self.keys.lane_rates))
        return self.rated

    def window(self, group: bytes) -> rates.Window | None:
        """The lane's rate window now, None when it has no rate limit."""
        lane_rates = self.lane_rates()
        windows = lane_rates.windows
        if group in windows:
            return windows[group]
        if group in lane_rates.written:
            rate = lane_rates.written[group]
        else:
            table = lane_rates.table
            raw = None if table is None else hashes.get(table, group)
            rate = None if raw is None else rates.parse_lane_rate(raw, group)
        window = None if rate is None else rates.Window(
            self.view, self.keys.lane_rate_log(group), rate, self.now_ms)
        windows[group] = window
        return window

    @property
    def due(self) -> list[Due]:
        """When the lanes whose rate window this plan filled have room again (RATED)."""
        return [] if self.rated is None else self.rated.due

    # --- the lanes' state after what was noted ----------------------------------------
    def size(self, group: bytes) -> int:
        return self.view.zcard(self.keys.lane(group)) + self.waiting.get(group, 0)

    def running(self, group: bytes) -> int:
        """gactive after the plan; a stored value HINCRBY would refuse refuses the verb."""
        stored = self.view.hget(self.keys.gactive, group)
        return max(incremented(stored, self.active.get(group, 0)), 0)

    def limit(self, group: bytes) -> int:
        value = self.limits.get(group)
        if value is not None:
            return value
        value = _own_limit(self.view, self.keys, group)
        if value is None:
            if self.queue_limit is None:
                self.queue_limit = _queue_limit(self.view, self.keys, self.config)
            value = self.queue_limit
        self.limits[group] = value
        return value

    def servable(self, group: bytes) -> bool:
        if self.size(group) <= 0:
            return False
        limit = self.limit(group)
        if limit != 0 and self.running(group) >= limit:
            return False
        window = self.window(group)
        return window is None or window.free > 0

    def was_in(self, member: bytes) -> bool:
        """Whether `member` was in the ring before the plan."""
        known = self.known.get(member)
        if known is not None:
            return known
        ring = self.view.zset(self.keys.ring)
        return ring is not None and member in ring

    def in_ring(self, member: bytes) -> bool:
        """Whether `member` is in the ring after the moves placed so far."""
        if member in self.placed:
            return self.placed[member] is not None
        return self.was_in(member)

    def to_back(self, member: bytes) -> None:
        """Place `member` at the back of the ring: score `rr + 1`."""
        if self.rr is None:
            self.rr = incremented(self.view.hget(self.keys.meta, RR), 0)
        if self.rr >= INT64_MAX:
            raise errors.OVERFLOW()  # HINCRBY's refusal, before anything is written
        self.rr += 1
        self.placed[member] = self.rr

    def take_out(self, member: bytes) -> None:
        self.placed[member] = None


def retune(view: View, keys: QueueKeys, config: Config, queue_limit: int,
           now_ms: int) -> list[Op]:
    """The ring ops for a new queue `lane_limit` (EMQ.CONFIG SET), in the same plan.

    Only a lane with active jobs can change from servable to full or back (a lane
    with none has a free slot under any limit), so the lanes visited are the
    fields of `gactive`: O(lanes with active jobs), never all lanes.
    """
    ledger = Ledger(view, keys, config, now_ms)
    ledger.queue_limit = queue_limit
    gactive = view.hash(keys.gactive)
    for group in () if gactive is None else hashes.names(gactive):
        ledger.waiting.setdefault(group, 0)  # touched: settle looks at it again
    return settle(ledger)


def _own_limit(view: View, keys: QueueKeys, group: bytes) -> int | None:
    """The lane's own limit (`glimit`), None when it has none; a corrupt one refuses."""
    raw = view.hget(keys.glimit, group)
    if raw is None:
        return None
    value = parse_limit(raw)
    if value is None:
        raise errors.corrupt_lane_limit(group)
    return value


def _queue_limit(view: View, keys: QueueKeys, config: Config) -> int:
    """The queue's `lane_limit` setting (only that field is read: it is all lanes need)."""
    raw = view.hget(keys.config, LANE_LIMIT)
    if raw is None:
        return config.lane_limit
    value = parse_limit(raw)
    if value is None:
        raise errors.corrupt_setting(LANE_LIMIT)
    return value


def settle(ledger: Ledger) -> list[Op]:
    """The ops that keep gactive, the ring, `rr` and `lanes_pending` exact after the plan."""
    view, keys = ledger.view, ledger.keys
    if not ledger.waiting and not ledger.placed:
        if not ledger.flat or not view.zcard(keys.ring):
            return []  # no servable lane: no ring, and pending is served directly
    ops: list[Op] = []
    set_active: list[Any] = []
    drop_active: list[bytes] = []
    entered = left = 0
    for group in _groups(ledger):
        was_in = ledger.was_in(group)
        if group in ledger.placed:
            now_in = ledger.placed[group] is not None
        else:
            now_in = ledger.servable(group)
            if now_in != was_in:
                if now_in:
                    ledger.to_back(group)
                else:
                    ledger.take_out(group)
        if now_in != was_in:
            entered += now_in
            left += was_in
        if ledger.active.get(group):
            running = ledger.running(group)
            if running:
                set_active += [group, b"%d" % running]
            elif view.hget(keys.gactive, group) is not None:
                drop_active.append(group)
    _settle_flat(ledger, entered, left)
    if set_active:
        ops.append((b"HSET", keys.gactive, *set_active))
    if drop_active:
        ops.append((b"HDEL", keys.gactive, *drop_active))
    if ledger.placed:
        ops += _ring_ops(ledger)
    meta_fields: list[Any] = []
    meta = view.hash(keys.meta)
    if ledger.rr is not None:
        incremented(None if meta is None else hashes.get(meta, RR), 0)  # to_back read it too
        meta_fields += [RR, b"%d" % ledger.rr]
    waiting = sum(ledger.waiting.values())
    if waiting:
        stored = None if meta is None else hashes.get(meta, LANES_PENDING)
        meta_fields += [LANES_PENDING, b"%d" % incremented(stored, waiting)]
    if meta_fields:
        ops.append((b"HSET", keys.meta, *meta_fields))
    if ledger.rated is not None and ledger.rated.windows:
        ops += _window_ops(ledger, ledger.rated)
    return ops


def _window_ops(ledger: Ledger, lane_rates: LaneRates) -> list[Op]:
    """The lanes' rate windows: the claims added, and each window this plan filled (or a
    new limit made full) entered in `rated` until it has room."""
    ops: list[Op] = []
    held: list[Any] = []
    for group, window in lane_rates.windows.items():
        if window is None:
            continue
        if window.added:
            ops += window.ops()
        if window.free <= 0 and (window.added or group in lane_rates.written):
            at = window.frees_at()
            held += [at, group]
            lane_rates.due.append((RATED, ledger.keys.queue, at))
    if held:
        ledger.view.check_zset(ledger.keys.rated)  # its type, before the ZADD
        ops.append((b"ZADD", ledger.keys.rated, *held))
    return ops


def _groups(ledger: Ledger) -> list[bytes]:
    if not ledger.placed:
        return list(ledger.waiting)
    return list(dict.fromkeys([*ledger.waiting, *(m for m in ledger.placed if m != FLAT)]))


def _settle_flat(ledger: Ledger, entered: int, left: int) -> None:
    """Place the flat member: in the ring when pending is not empty and a lane is in it.

    Looks only at what can change the answer: when pending's size is unchanged
    and lanes stay in the ring whatever the flat member's own state (at least
    one of the ring's other members is a lane that stays), it stays as it is.
    """
    view, keys = ledger.view, ledger.keys
    ring_size = view.zcard(keys.ring)
    if (ring_size and ring_size - 1 + entered - left > 0 and not ledger.flat
            and FLAT not in ledger.placed):
        return  # a lane stays in the ring and pending is unchanged: already right
    # (with no ring before the plan the flat member was out of it whatever pending
    # held, so lanes entering now must be followed by it: no shortcut)
    lanes_after = ring_size - ledger.was_in(FLAT) + entered - left if ring_size else entered
    wanted = lanes_after > 0 and view.zcard(keys.pending) + ledger.flat > 0
    if wanted != ledger.in_ring(FLAT):
        if wanted:
            ledger.to_back(FLAT)
        else:
            ledger.take_out(FLAT)


def _ring_ops(ledger: Ledger) -> list[Op]:
    ring = ledger.keys.ring
    out = [m for m, score in ledger.placed.items() if score is None and ledger.was_in(m)]
    into: list[Any] = []
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
class Served:
    """What CLAIM's turn round the ring found.

    `taken`: waiting set -> members removed from it (jobs, ghosts, corrupt
    rows); `jobs`: (id, row, token) to hand out, in turn order; `corrupt`: (id,
    HINCRBY's text) to dead-letter; `ledger`: the moves, ready for `settle`;
    `cut_off`: the turn stopped because it had skipped as many members as it
    may (the rest is for the next call). A plain class, not a dataclass: one is
    made per lane CLAIM that takes the general path, and mypyc keeps a
    dataclass's generated __init__ interpreted (emqd/commit/plan.py's Plan).
    """

    __slots__ = ("taken", "jobs", "corrupt", "ledger", "cut_off")

    def __init__(self, taken: dict[bytes, list[bytes]], jobs: list[tuple[bytes, Hash, int]],
                 corrupt: list[tuple[bytes, bytes]], ledger: Ledger,
                 cut_off: bool = False) -> None:
        self.taken = taken
        self.jobs = jobs
        self.corrupt = corrupt
        self.ledger = ledger
        self.cut_off = cut_off


class _Skips:
    """How many more members (ghosts, corrupt rows, ring members found empty or full)
    one turn may skip."""

    __slots__ = ("left",)

    def __init__(self, most: int) -> None:
        self.left = most

    def spend(self) -> bool:
        """One more skipped; True once the turn must stop."""
        self.left -= 1
        return self.left <= 0


Judge = Callable[[Hash], "int | bytes"]  # CLAIM's rule for a row: its token, or why it dies


class _Source:
    """One ring member's waiting set, walked from the front (ghosts and corrupt rows skipped)."""

    __slots__ = ("group", "key", "members")

    def __init__(self, view: View, keys: QueueKeys, member: bytes) -> None:
        self.group = member or None
        self.key = waiting_key(keys, self.group)
        zset = view.zset(self.key)
        self.members: Iterator[bytes] = iter(()) if zset is None else zset.members()


def serve(view: View, keys: QueueKeys, want: int, config: Config, judge: Judge,
          now_ms: int, skip_max: int) -> Served:
    """Go round the ring job by job until `want` jobs are found, nothing is servable, or
    `skip_max` members were skipped (`Served.cut_off`).

    Each turn takes the ring's lowest-score member, takes its front job, and
    moves the member to the back (`rr + 1`) or out of the ring when it became
    empty or full. A member that turns out empty or full when its turn comes
    (a plain write from a client) is taken out and skipped. The ring and each
    lane are walked from their front, lazily: picking a member costs O(log n)
    whatever the number of lanes. `judge` is CLAIM's own rule for each row met
    (claim.judge).
    """
    ledger = Ledger(view, keys, config, now_ms)
    ring = view.zset(keys.ring)
    first: Iterator[bytes] = iter(()) if ring is None else ring.members()
    sources: dict[bytes, _Source] = {}
    turns: list[bytes] = []  # members moved to the back, in order: served after the first pass
    taken: dict[bytes, list[bytes]] = {}
    jobs: list[tuple[bytes, Hash, int]] = []
    corrupt: list[tuple[bytes, bytes]] = []
    back = 0
    skips = _Skips(skip_max)
    while len(jobs) < want:
        member = next(first, None)
        if member is not None:
            ledger.known[member] = True
        elif back < len(turns):
            member = turns[back]
            back += 1
        else:
            break
        source = sources.get(member)
        if source is None:
            source = sources[member] = _Source(view, keys, member)
        if source.group is not None and not ledger.servable(source.group):
            ledger.take_out(member)
            if skips.spend():
                return Served(taken, jobs, corrupt, ledger, True)
            continue
        found = _next_job(view, keys, source, ledger, judge, taken, corrupt, skips)
        if found is _CUT_OFF:
            return Served(taken, jobs, corrupt, ledger, True)  # settle re-judges its lane
        if found is None:
            ledger.take_out(member)
            if skips.spend():
                return Served(taken, jobs, corrupt, ledger, True)
            continue
        jobs.append(found)
        ledger.claimed(source.group, rates.claim_member(found[0], b"%d" % found[2]))
        if _still_servable(source, ledger):
            ledger.to_back(member)
            turns.append(member)
        else:
            ledger.take_out(member)
    return Served(taken, jobs, corrupt, ledger)


def _still_servable(source: _Source, ledger: Ledger) -> bool:
    if source.group is None:
        return ledger.view.zcard(ledger.keys.pending) + ledger.flat > 0
    return ledger.servable(source.group)


_CUT_OFF: Final[tuple[Any, ...]] = ("cut off",)  # _next_job's answer: the skips ran out first


def _next_job(view: View, keys: QueueKeys, source: _Source, ledger: Ledger, judge: Judge,
              taken: dict[bytes, list[bytes]], corrupt: list[Any],
              skips: _Skips) -> tuple[Any, ...] | None:
    """The source's next claimable job (id, row, token), None when it ran out, _CUT_OFF
    when it skipped the last member the turn may skip."""
    for job_id in source.members:
        taken.setdefault(source.key, []).append(job_id)
        row = view.hash(keys.job(job_id))
        if row is not None:
            token = judge(row)
            if type(token) is not bytes:
                return (job_id, row, token)
            corrupt.append((job_id, token))  # dead-lettered by CLAIM
        # else a ghost: removed, listed nowhere
        ledger.leave_waiting(source.group)
        if skips.spend():
            return _CUT_OFF
    return None


# --- the common moves, without the ledger ---------------------------------------------------
# Nearly every lane CLAIM takes one job from the ring's head lane, and nearly every COMPLETE
# of a lane job gives its slot back. Both are answered here from a few reads, with the values
# `serve` + `settle` would write; anything else (a ghost or corrupt row at the front, a full or
# rate-limited lane, the flat member, a ring so small that the flat member may have to move,
# a stored value that would refuse) answers None, and the verb takes the general path, which
# decides (and refuses) as it always did. tests/verbs/test_lanes_fast.py checks both against
# the general path, plan for plan.

class Turn:
    """CLAIM's turn for one job from the ring's head lane (serve_one): the job, its token,
    the lane's `gactive` after it, and the lane's place after it: `rr` its new score at the
    back of the ring, or None when it leaves the ring (empty or full); `lanes_pending` the
    new total. `lane_key` and `row_key` are the keys it read, for the plan's ops (a bytes
    object keeps its hash: the store's lookups of the same object cost less)."""

    __slots__ = ("group", "lane_key", "job_id", "row_key", "row", "token", "running", "rr",
                 "lanes_pending")

    def __init__(self, group: bytes, lane_key: bytes, job_id: bytes, row_key: bytes, row: Hash,
                 token: int, running: int, rr: int | None, lanes_pending: int) -> None:
        self.group = group
        self.lane_key = lane_key
        self.job_id = job_id
        self.row_key = row_key
        self.row = row
        self.token = token
        self.running = running
        self.rr = rr
        self.lanes_pending = lanes_pending


def serve_one(view: View, keys: QueueKeys, config: Config, ring: ZSet, meta: Hash | None,
              judge: Judge) -> Turn | None:
    """The turn `serve(..., want=1)` takes when the ring's head is a lane that can be served,
    its front job is claimable, and the lane has no rate limit; None otherwise."""
    try:
        return _serve_one(view, keys, config, ring, meta, judge)
    except ReplyError:
        return None  # a stored value that refuses: the general path gives the refusal


def _serve_one(view: View, keys: QueueKeys, config: Config, ring: ZSet, meta: Hash | None,
               judge: Judge) -> Turn | None:
    if len(ring) < 2:
        return None  # the flat member may have to leave with the lane (_settle_flat)
    group = ring.first_member()
    if not group:
        return None  # the flat member's turn
    lane_key = keys.lane(group)
    lane = view.zset(lane_key)
    if lane is None:
        return None
    job_id = lane.first_member()
    if job_id is None:
        return None
    row_key = keys.job(job_id)
    row = view.hash(row_key)
    if row is None:
        return None  # a ghost
    token = judge(row)
    if isinstance(token, bytes):
        return None  # a corrupt row, dead-lettered
    running = _stored_running(view, keys, group)
    if running is None:
        return None
    limit = _own_limit(view, keys, group)
    if limit is None:
        limit = _queue_limit(view, keys, config)
    if limit and running >= limit:
        return None  # full: skipped and taken out
    if _rated(view, keys, group):
        return None
    running += 1
    stays = len(lane) > 1 and (not limit or running < limit)
    if not stays and len(ring) < 3:
        return None  # the same, with this lane leaving
    rr = None
    if stays:
        rr = _next_turn(meta)
        if rr is None:
            return None
    stored = None if meta is None else hashes.get(meta, LANES_PENDING)
    return Turn(group, lane_key, job_id, row_key, row, token, running,
                rr, incremented(stored, -1))


def slot_back(view: View, keys: QueueKeys, queue_limit: int,
              group: bytes) -> tuple[int, int | None] | None:
    """What `settle` writes when a job of lane `group` leaves `active` (COMPLETE) and the
    lane stays out of the ring or enters it: (gactive after, the lane's score at the back of
    the ring or None when it does not enter). None when anything else may happen.
    `queue_limit`: the queue's `lane_limit`, from its validated settings."""
    try:
        return _slot_back(view, keys, queue_limit, group)
    except ReplyError:
        return None


def _slot_back(view: View, keys: QueueKeys, queue_limit: int,
               group: bytes) -> tuple[int, int | None] | None:
    running = _stored_running(view, keys, group)
    if running is None or running < 1:
        return None
    running -= 1
    ring = view.zset(keys.ring)
    if ring is None or not len(ring):
        return None  # no ring: the flat member may have to enter with the lane
    was_in = group in ring
    lane = view.zset(keys.lane(group))
    now_in = False
    if lane is not None and len(lane):
        limit = _own_limit(view, keys, group)
        if limit is None:
            limit = queue_limit
        if not limit or running < limit:
            if _rated(view, keys, group):
                return None
            now_in = True
    if was_in:
        return (running, None) if now_in and len(ring) > 1 else None
    if not now_in:
        return (running, None) if len(ring) > 1 else None
    rr = _next_turn(view.hash(keys.meta))
    return None if rr is None else (running, rr)


def _stored_running(view: View, keys: QueueKeys, group: bytes) -> int | None:
    """The lane's stored `gactive`, when it is a count the fast paths may move by one."""
    stored = view.hget(keys.gactive, group)
    if stored is None:
        return 0
    value = parse_int(stored)
    return value if value is not None and 0 <= value < INT64_MAX else None


def _rated(view: View, keys: QueueKeys, group: bytes) -> bool:
    """Whether the lane has a rate limit (`grate`)."""
    table = view.hash(keys.lane_rates)
    return table is not None and hashes.has(table, group)


def _next_turn(meta: Hash | None) -> int | None:
    """`rr + 1`, the back of the ring, or None when it would refuse (Ledger.to_back)."""
    rr = incremented(None if meta is None else hashes.get(meta, RR), 0)
    return rr + 1 if rr < INT64_MAX else None
