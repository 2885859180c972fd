"""The server's own clock work (protocol section 6.4): promotion, the stall sweep, retention,
the schedules' jobs and the lanes' rate windows.

emqd does not wait for clients to drive time. Five jobs run on the event loop,
each through the same planners as the verbs (`verb.plan`, then
`ServerState.commit`, so they are applied and logged like any verb), each
followed by the server's `wake` so that parked claimers see their result:

- promotion: the PROMOTE plan for a queue, at the earliest due time of its
  `scheduled` set (within a few ms: a loop timer, not a poll);
- the stall sweep: the STALLED.CHECK plan with the queue's `max_stalled`, when
  the earliest lease of its `active` set runs out (`--stalled-interval` 0
  turns it off);
- retention: the retention slice, after a queue's `config` was written (a
  lowered `keep_completed` / `keep_dead`), once per queue at start, and when
  its oldest finished row outlives `keep_completed_ms` / `keep_dead_ms`;
- repeatable jobs: the schedules' planner (verbs/repeat_fire.py) at the
  earliest next slot of the queue's `repeats` set;
- rate windows: the planner that puts lanes whose rate window has room back
  in the ring (verbs/rate_release.py), at the earliest time of `rated`.

How it learns of due times without polling: `ServerState.commit` hands every
committed plan to `learn`. A verb's plan says itself what housekeeping must
know (`Plan.due`: a lease that runs out, a job scheduled, a queue's settings
changed), so its ops are not read again; only a plain Redis command's plan
(a client's own ZADD into `scheduled`) is looked at op by op (`observe`:
ZADD ops on keys ending in `}:scheduled` / `}:active` / `}:repeats` /
`}:rated`, writes to `}:config`).
Housekeeping keeps, per job, one `Deadlines`: a heap of (time, queue) with the
earliest known time of each queue, and one loop timer on the heap's top. A
later deadline (an EXTEND) never adds an entry; an entry that turns out early
(its job was extended or removed) costs one empty pass, after which the
queue's true earliest time is read from the store.

The sweep judges only after the sockets were read (section 6.4): when its
timer fires, it notes the time and waits for a timer of SETTLE_S, which runs
after the loop's next poll of the sockets (a loop iteration runs its due
timers *before* it polls, so without this, after one long command the sweep
would run before the heartbeats already waiting in the sockets were read).
It then counts only the leases that ran out by the time it fired, each of
which was thus given a read of every socket begun after its deadline.

Work is done in slices of SLICE jobs, one slice per queue and at most
QUEUES_PER_TURN queues per loop iteration, so a backlog never stalls the loop.
A refused slice (a corrupt row) is logged once with the queue and the job
(found by asking the same planner for shorter LIMITs, no second copy of its
rules), the slices before that job are applied, the refusal is counted for
INFO, and the queue is tried again a retry interval later: it never spins.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from emqd import clock
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.keys import QUEUES, queue_keys
from emqd.plan import AGING, CONFIGURED, LEASED, RATED, REPEATING, SCHEDULED, Op, Plan
from emqd.server_state import ServerState
from emqd.store.zset import ZSet
from emqd.verbs import args as verb_args

log = logging.getLogger("emqd")

SLICE = 100  # jobs per plan: a slice never holds the loop for long
REPEAT_SLICE = 20  # schedules per plan: a cron schedule's slots cost croniter ~0.5 ms
RETRY_MS = 1000  # a refused promotion or retention slice is tried again this much later
QUEUES_PER_TURN = 16  # queues served per timer run; the rest at the loop's next turn
MAX_TIMER_MS = 3_600_000  # a far due time is looked at again after an hour, not armed as is
LOGGED_MAX = 10_000  # refusals remembered so that each is logged once

_SCHEDULED = b"}:scheduled"
_ACTIVE = b"}:active"
_REPEATS = b"}:repeats"
_RATED = b"}:rated"
_CONFIG = b"}:config"
_PREFIX = b"emq:{"
_UNWATCHED = ()  # a ZADD key that feeds no Deadlines
TARGETS_MAX = 65_536  # keys remembered by `observe`; cleared when full
# A timer this short runs after the loop's next I/O poll. 0 would not: uvloop
# runs call_later(0) as call_soon, before the poll (tests/test_housekeeping.py).
SETTLE_S = 0.001


class Deadlines:
    """Per-queue earliest times, a heap of (time, queue) and one loop timer on its top.

    `note(queue, at_ms)` is cheap enough for the write path: it does nothing
    when the queue already waits for an earlier time. When the timer fires,
    every queue whose time has come is handed to `due(queue, now_ms)` once,
    and forgotten: `due` notes the queue's next time itself. `hold(queue,
    until)` (after a refusal) keeps new writes from bringing the queue back
    sooner than `until`.

    With `after_io`, a fired timer first lets the loop read its sockets (a
    SETTLE_S timer), then hands over the queues due by the time it fired,
    with that time as `now_ms`.
    """

    def __init__(self, due: Callable[[bytes, int], None], after_io: bool = False) -> None:
        self.due = due
        self.after_io = after_io
        self.fired_at: int | None = None  # with after_io: the time a fired timer waits to judge
        self.heap: list[tuple[int, bytes]] = []
        self.earliest: dict[bytes, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: int | None = None
        self.not_before: dict[bytes, int] = {}

    def note(self, queue: bytes, at_ms: int) -> None:
        if self.not_before:
            at_ms = max(at_ms, self.not_before.get(queue, at_ms))
        known = self.earliest.get(queue)
        if known is not None and known <= at_ms:
            return
        self.earliest[queue] = at_ms
        heapq.heappush(self.heap, (at_ms, queue))
        if self.loop is not None and (self.timer_at is None or at_ms < self.timer_at):
            self._arm()

    def hold(self, queue: bytes, until_ms: int) -> None:
        self.not_before[queue] = until_ms
        self.note(queue, until_ms)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._arm()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.timer_at = self.fired_at = None
        self.loop = None

    def _arm(self) -> None:
        if self.fired_at is not None:
            return  # the settle timer runs first; it arms the next deadline after judging
        if self.timer is not None:
            self.timer.cancel()
            self.timer = self.timer_at = None
        if not self.heap or self.loop is None:
            return
        at = self.heap[0][0]
        delay_ms = min(max(at - clock.now_ms(), 0), MAX_TIMER_MS)
        self.timer_at = at
        self.timer = self.loop.call_later(delay_ms / 1000.0, self._fire)

    def _fire(self) -> None:
        self.timer = self.timer_at = None
        now = clock.now_ms()
        if self.after_io:
            assert self.loop is not None  # stop() cancels the timer
            self.fired_at = self.timer_at = now
            self.timer = self.loop.call_later(SETTLE_S, self._settled)
            return
        self._run_due(now)

    def _settled(self) -> None:
        """The sockets were read since the timer fired: judge as of the time it fired."""
        now = self.fired_at
        assert now is not None  # set by _fire; stop() cancels this timer
        self.timer = self.timer_at = self.fired_at = None
        self._run_due(now)

    def _run_due(self, now: int) -> None:
        heap, earliest = self.heap, self.earliest
        ready: list[bytes] = []
        while heap and heap[0][0] <= now and len(ready) < QUEUES_PER_TURN:
            at, queue = heapq.heappop(heap)
            if earliest.get(queue) == at:  # else a stale entry: an earlier one replaced it
                del earliest[queue]
                self.not_before.pop(queue, None)
                ready.append(queue)
        for queue in ready:
            try:
                self.due(queue, now)
            except Exception:  # a bug must not stop the clock work of every queue
                log.exception("housekeeping: %r failed; retried later", queue)
                self.hold(queue, now + RETRY_MS)
        if self.timer is None:
            self._arm()


@dataclass(slots=True)
class Planners:
    """The planner modules housekeeping runs (tests substitute fakes; the last two default
    to the real ones)."""

    promote: ModuleType
    stalled: ModuleType
    retention: ModuleType
    repeat: ModuleType | None = None
    release: ModuleType | None = None


@dataclass(slots=True)
class Counters:
    """What housekeeping adds to INFO's `# Stats` section."""

    promoted: int = 0  # jobs promoted
    stall_recovered: int = 0  # expired leases returned to pending by the sweep
    stall_dead: int = 0  # expired leases dead-lettered by the sweep
    trimmed: int = 0  # finished rows deleted by retention slices
    repeated: int = 0  # jobs added by schedules
    released: int = 0  # lanes back in the ring when their rate window had room
    refused: int = 0  # slices refused (a corrupt row); each retried later
    last_refusal: str = ""

    def reset(self) -> None:
        """CONFIG RESETSTAT: every counter back to 0 (in place: INFO holds `info`)."""
        for name in ("promoted", "stall_recovered", "stall_dead", "trimmed", "refused"):
            setattr(self, name, 0)
        self.last_refusal = ""

    def info(self) -> dict[str, object]:
        return {
            "housekeeping_promoted": self.promoted,
            "housekeeping_stall_recovered": self.stall_recovered,
            "housekeeping_stall_dead": self.stall_dead,
            "housekeeping_trimmed": self.trimmed,
            "housekeeping_repeated": self.repeated,
            "housekeeping_released": self.released,
            "housekeeping_refused": self.refused,
            "housekeeping_last_refusal": self.last_refusal,
        }


class Housekeeping:
    def __init__(self, state: ServerState, wake: Callable[[], None],
                 planners: Planners | None = None) -> None:
        self.state = state
        self.wake = wake  # re-runs the parked requests whose keys a plan wrote
        self.planners = planners or default_planners()
        self.repeat_planner, self.release_planner = _schedules_and_rates(self.planners)
        self.sweep_interval = state.config.stalled_interval  # 0: no stall sweep
        self.counters = Counters()
        self.logged: set[tuple[Any, ...]] = set()  # refusals already logged: each is logged once
        self.promotion = Deadlines(self._promote)
        self.sweep = Deadlines(self._sweep, after_io=True)  # heartbeats in the sockets win
        self.retention = Deadlines(self._trim)
        self.repeats = Deadlines(self._repeat)
        self.rated = Deadlines(self._release)
        self._targets: dict[bytes, Any] = {}  # ZADD key -> (Deadlines, queue) | _UNWATCHED

    # --- wiring -------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch commits, and look at every known queue once (after the file is loaded)."""
        self.state.housekeeping = self
        self.state.info_fields.setdefault("stats", []).append(self.counters.info)
        now = clock.now_ms()
        for _, queue in self._zset(QUEUES) or ():
            keys = queue_keys(queue)
            self._note_next(self.promotion, keys.scheduled, queue, now)
            if self.sweep_interval:
                self._note_next(self.sweep, keys.active, queue, now)
            self.retention.note(queue, now)
            self._note_next(self.rated, keys.rated, queue, now)
            self._note_next(self.repeats, keys.repeats, queue, now)
        for deadlines in self._all():
            deadlines.start(loop)

    def _all(self) -> tuple[Deadlines, ...]:
        return (self.promotion, self.sweep, self.retention, self.repeats, self.rated)

    def reconfigure(self, old: Config, new: Config) -> None:
        """CONFIG SET of a setting housekeeping acts on.

        `stalled-interval`: 0 stops the sweep (a due queue is passed over); from 0
        to another value, every queue's earliest lease is looked up again, as at
        start. Lowered server defaults of retention (`keep-completed`,
        `keep-dead`, or an age limit `keep-*-ms` set or shortened): every queue is
        trimmed again, in slices, as after a
        queue's own `EMQ.CONFIG SET` (a queue with settings of its own costs one
        empty slice). Every other setting is read from `state.config` when used.
        """
        now = clock.now_ms()
        if new.stalled_interval != old.stalled_interval:
            was_on, self.sweep_interval = self.sweep_interval, new.stalled_interval
            self._targets.clear()  # an `active` key's ZADD feeds the sweep, or no longer
            if self.sweep_interval and not was_on:
                for _, queue in self._zset(QUEUES) or ():
                    self._note_next(self.sweep, queue_keys(queue).active, queue, now)
        if (new.keep_completed < old.keep_completed or new.keep_dead < old.keep_dead
                or _tighter(old.keep_completed_ms, new.keep_completed_ms)
                or _tighter(old.keep_dead_ms, new.keep_dead_ms)):
            for _, queue in self._zset(QUEUES) or ():
                self.retention.note(queue, now)

    def stop(self) -> None:
        if self.state.housekeeping is self:
            self.state.housekeeping = None
        for deadlines in self._all():
            deadlines.stop()

    def learn(self, plan: Plan) -> None:
        """Called by `commit` with every applied plan that has something to say."""
        due = plan.due
        if due is None:
            self.observe(plan.ops)
            return
        for what, queue, at in due:
            if what == LEASED:
                if self.sweep_interval:
                    self.sweep.note(queue, at)
            elif what == SCHEDULED:
                self.promotion.note(queue, at)
            elif what == REPEATING:
                self.repeats.note(queue, at)
            elif what == RATED:
                self.rated.note(queue, at)
            elif what == AGING:
                self.retention.note(queue, at)
            elif what == CONFIGURED:
                self.retention.note(queue, clock.now_ms())

    def observe(self, ops: list[Op]) -> None:
        """A plain command's plan: note new due times and config writes from its ops.

        This runs on every write, so the common case is kept to a few dict
        lookups: which `Deadlines` a ZADD's key feeds is worked out once per
        key, and a score later than the queue's known earliest time stops there.
        """
        for op in ops:
            name = op[0]
            if name == b"ZADD":
                target = self._targets.get(op[1])
                if target is None:
                    target = self._target_of(op[1])
                if target is _UNWATCHED:
                    continue
                deadlines, queue = target
                score = op[2] if len(op) == 4 else min(op[2::2], key=float)
                at = score if type(score) is int else _ms(float(score))
                known = deadlines.earliest.get(queue)
                if known is None or at < known:
                    deadlines.note(queue, at)
            elif name == b"HSET" or name == b"HDEL":
                if op[1].endswith(_CONFIG):
                    self._note_now(self.retention, op[1], len(_CONFIG))
            elif name == b"DEL":
                for key in op[1:]:
                    if key.endswith(_CONFIG):
                        self._note_now(self.retention, key, len(_CONFIG))

    def _target_of(self, key: bytes) -> Any:
        """The (Deadlines, queue) a ZADD to `key` feeds, or _UNWATCHED; cached."""
        target: Any = _UNWATCHED
        if key.endswith(_SCHEDULED):
            queue = _queue_of(key, len(_SCHEDULED))
            if queue is not None:
                target = (self.promotion, queue)
        elif key.endswith(_ACTIVE) and self.sweep_interval:
            queue = _queue_of(key, len(_ACTIVE))
            if queue is not None:
                target = (self.sweep, queue)
        elif key.endswith(_REPEATS) or key.endswith(_RATED):
            suffix, deadlines = ((_REPEATS, self.repeats) if key.endswith(_REPEATS)
                                 else (_RATED, self.rated))
            queue = _queue_of(key, len(suffix))
            if queue is not None:
                target = (deadlines, queue)
        if len(self._targets) >= TARGETS_MAX:
            self._targets.clear()
        self._targets[key] = target
        return target

    def _note_now(self, deadlines: Deadlines, key: bytes, suffix: int) -> None:
        queue = _queue_of(key, suffix)
        if queue is not None:
            deadlines.note(queue, clock.now_ms())

    # --- the three jobs -----------------------------------------------------------
    def _promote(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices(b"EMQ.PROMOTE", self.planners.promote, queue, keys.scheduled,
                             now, RETRY_MS, self.promotion)
        if reply is not None:
            self.counters.promoted += reply

    def _sweep(self, queue: bytes, now: int) -> None:
        if not self.sweep_interval:
            return
        keys = queue_keys(queue)
        reply = self._slices(b"EMQ.STALLED.CHECK", self.planners.stalled, queue, keys.active,
                             now, self.sweep_interval, self.sweep)
        if reply is not None:
            recovered, dead = reply
            self.counters.stall_recovered += len(recovered)
            self.counters.stall_dead += len(dead)

    def _trim(self, queue: bytes, now: int) -> None:
        retention = self.planners.retention
        try:
            result = retention.plan(retention.slice_args(queue, self.state.config),
                                    self.state.keyspace, now, self.state.run_id_bytes)
        except ReplyError as error:
            self._refused("retention", queue, None, error)
            self.retention.hold(queue, now + RETRY_MS)
            return
        deleted = self._commit(result)
        if deleted:
            self.counters.trimmed += deleted
            self.retention.note(queue, now)  # more may be in excess: the next slice, next turn
            return
        next_aging = getattr(retention, "next_aging", None)
        if next_aging is not None:
            try:
                at = next_aging(self.state.keyspace, queue_keys(queue), self.state.config)
            except ReplyError:
                at = None  # a corrupt setting: the slice above was refused the same way
            if at is not None:
                self.retention.note(queue, max(at, now + 1))

    def _repeat(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices(b"EMQ.REPEAT.FIRE", self.repeat_planner,
                             queue, keys.repeats, now, RETRY_MS, self.repeats, REPEAT_SLICE)
        if reply is not None:
            self.counters.repeated += reply

    def _release(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices(b"EMQ.RATE.RELEASE", self.release_planner,
                             queue, keys.rated, now, RETRY_MS, self.rated)
        if reply is not None:
            self.counters.released += reply

    # --- one slice of PROMOTE / STALLED.CHECK -------------------------------------
    def _slices(self, name: bytes, verb: ModuleType, queue: bytes, zkey: bytes, now: int,
                retry_ms: int, deadlines: Deadlines, size: int = SLICE) -> Any:
        """Run one slice on `zkey`'s due members; note when to come back. The reply, or None."""
        first = self._first_due(zkey, now)
        if first is None:
            self._note_next(deadlines, zkey, queue, now)
            return None
        try:
            reply = self._commit(self._plan(name, verb, queue, size, now))
        except ReplyError as error:
            deadlines.hold(queue, now + retry_ms)
            return self._refused_slice(name, verb, queue, zkey, now, error, size)
        after = self._first_due(zkey, now)
        if after is None:
            self._note_next(deadlines, zkey, queue, now)
        elif after == first:  # no progress (a member the planner leaves in place)
            deadlines.hold(queue, now + retry_ms)
        else:
            deadlines.note(queue, now)  # the next slice, at the loop's next turn
        return reply

    def _plan(self, name: bytes, verb: ModuleType, queue: bytes, limit: int, now: int) -> Any:
        args = verb.parse([name, queue, b"LIMIT", b"%d" % limit], self.state.config)
        return verb.plan(args, self.state.keyspace, now, self.state.run_id_bytes)

    def _refused_slice(self, name: bytes, verb: ModuleType, queue: bytes, zkey: bytes,
                       now: int, error: ReplyError, size: int = SLICE) -> Any:
        """Find the member that refuses the slice, apply the members before it, log it once.

        Returns the reply of the members applied, or None.
        """
        members = self._due_members(zkey, now, size)
        culprit = reply = None
        if members and self._refuses(name, verb, queue, len(members), now):
            low, high = 1, len(members)  # the shortest refused LIMIT: its last member
            while low < high:
                middle = (low + high) // 2
                if self._refuses(name, verb, queue, middle, now):
                    high = middle
                else:
                    low = middle + 1
            culprit = members[low - 1]
            if low > 1:
                reply = self._commit(self._plan(name, verb, queue, low - 1, now))
        self._refused(name.decode().lower(), queue, culprit, error)
        return reply

    def _refuses(self, name: bytes, verb: ModuleType, queue: bytes, limit: int, now: int) -> bool:
        try:
            self._plan(name, verb, queue, limit, now)
        except ReplyError:
            return True
        return False

    def _refused(self, what: str, queue: bytes, job: bytes | None, error: ReplyError) -> None:
        counters = self.counters
        counters.refused += 1
        text = error.message.decode(errors="replace")
        job_text = "" if job is None else f" job {job.decode(errors='replace')!r}"
        # repr() keeps ids with control bytes on one line (INFO is line-based)
        counters.last_refusal = f"{what} queue {queue.decode(errors='replace')!r}{job_text}: {text}"
        key = (what, queue, job, error.message)
        if key not in self.logged:
            if len(self.logged) >= LOGGED_MAX:
                self.logged.clear()
            self.logged.add(key)
            log.warning("housekeeping: %s refused, retried later", counters.last_refusal)

    # --- the store ------------------------------------------------------------------
    def _commit(self, result: Any) -> Any:
        if type(result) is Plan:
            self.state.commit(result)
            self.wake()
            return result.reply
        return result

    def _zset(self, key: bytes) -> ZSet | None:
        try:
            return self.state.keyspace.zset(key)
        except ReplyError:
            return None  # a client's hash under the name: the planner refuses it

    def _first_due(self, zkey: bytes, now: int) -> bytes | None:
        members = self._due_members(zkey, now, 1)
        return members[0] if members else None

    def _due_members(self, zkey: bytes, now: int, limit: int) -> list[bytes]:
        zset = self._zset(zkey)
        return [] if zset is None else zset.due(now, limit)

    def _note_next(self, deadlines: Deadlines, zkey: bytes, queue: bytes, now: int) -> None:
        zset = self._zset(zkey)
        first = zset.first() if zset is not None else None
        if first is not None:
            deadlines.note(queue, max(_ms(first[0]), now))


def _tighter(old_ms: int, new_ms: int) -> bool:
    """Whether a new age limit (0: none) keeps fewer rows than the old one."""
    return new_ms != 0 and (old_ms == 0 or new_ms < old_ms)


def _queue_of(key: bytes, suffix: int) -> bytes | None:
    """The queue of `emq:{QUEUE}` + suffix, or None for a key outside the EMQ keyspace."""
    if not key.startswith(_PREFIX):
        return None
    queue = key[len(_PREFIX) : -suffix]
    try:
        return verb_args.queue_name(queue)
    except ReplyError:
        return None


def _ms(score: float) -> int:
    """A score as the first whole millisecond at which `score <= now` holds."""
    if math.isinf(score):
        return 0 if score < 0 else 2**62
    return math.ceil(score)


def _schedules_and_rates(planners: Planners) -> tuple[ModuleType, ModuleType]:
    """The planners of the schedules' jobs and of the lanes' rate windows: the ones given,
    else the verbs' own (a test's Planners of the first three leaves them out)."""
    from emqd.verbs import rate_release, repeat_fire

    return planners.repeat or repeat_fire, planners.release or rate_release


def default_planners() -> Planners:
    """The verbs' own planners (imported here: the verbs import nothing of this module)."""
    from emqd.verbs import promote, rate_release, repeat_fire, retention, stalled_check

    return Planners(promote, stalled_check, retention, repeat_fire, rate_release)
