"""The server's own clock work (protocol section 6.4): promotion, the stall sweep, retention,
the schedules' jobs and the lanes' rate windows.

emqd does not wait for clients to drive time. Five jobs run on the event loop,
each through the same planners as the verbs (`verb.plan` on typed arguments,
`slice_args`, then the commit path, so they are applied and kept like any
verb), each followed by the server's `wake` so that parked claimers see their
result:

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
  in the ring (verbs/rate_release.py), at the earliest time of `rated`;
- the metrics history: at each minute's end, the close of that minute
  (verbs/minute_close.py) for each queue that had something happen in it
  (emqd/commit/history.py), CLOSE_DELAY_MS after the boundary; at shutdown, every
  minute still open, the current one too (`close_minutes`).

When each is due is learnt from what is committed, without polling (emqd/commit/dues.py:
one `Deadlines` per job); housekeeping starts their timers with its jobs.

The sweep judges only after the sockets were read (section 6.4): when its
timer fires, it notes the time and waits for a timer of SETTLE_S, which runs
after the loop's next poll of the sockets (a loop iteration runs its due
timers *before* it polls, so without this, after one long command the sweep
would run before the heartbeats already waiting in the sockets were read).
It then counts only the leases that ran out by the time it fired, each of
which was thus given a read of every socket begun after its deadline.

Work is done in slices of SLICE jobs, one slice per queue and at most
QUEUES_PER_TURN queues per loop iteration, so a backlog never stalls the loop.
The sweep dead-letters a row whose own field is corrupt and recovers the rest
(stalled_check.slice_args), counting and logging each such row. A refused slice
(a corrupt row elsewhere) is logged once with the queue and the job
(found by asking the same planner for shorter limits, no second copy of its
rules), the slices before that job are applied, the refusal is counted for
INFO, and the queue is tried again a retry interval later: it never spins.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from emqd import clock
from emqd.commit.dues import RETRY_MS, Deadlines, score_ms
from emqd.commit.history import OpenMinute
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.core import Core
from emqd.errors import ReplyError
from emqd.layout import QUEUES, queue_keys
from emqd.rules import minutes
from emqd.store.zset import ZSet
from emqd.verbs import minute_close

log = logging.getLogger("emqd")

SLICE = 100  # jobs per plan: a slice never holds the loop for long
REPEAT_SLICE = 20  # schedules per plan: a cron schedule's slots cost croniter ~0.5 ms
LOGGED_MAX = 10_000  # refusals remembered so that each is logged once
CLOSE_DELAY_MS = 5  # a minute is closed this long after it ends (plans of its last ms ran)
CLOSES_PER_TURN = 100  # queues' minutes closed in one loop turn; the rest at the next


@dataclass(slots=True)
class Planners:
    """The planner modules housekeeping runs (tests substitute fakes; the last two default
    to the real ones). Each slice planner has `slice_args(queue, limit, config)` and
    `plan(args, view, now_ms, run_id)`; retention's `slice_args(queue, config)`."""

    promote: ModuleType
    stalled: ModuleType
    retention: ModuleType
    repeat: ModuleType | None = None
    release: ModuleType | None = None


class Housekeeping:
    def __init__(self, core: Core, wake: Callable[[], None],
                 planners: Planners | None = None) -> None:
        self.core = core
        self.wake = wake  # re-runs the parked requests whose keys a plan wrote
        self.planners = planners or default_planners()
        self.repeat_planner, self.release_planner = _schedules_and_rates(self.planners)
        self.sweep_interval = core.config.stalled_interval  # 0: no stall sweep
        self.counters = core.stats.housekeeping
        self.logged: set[tuple[Any, ...]] = set()  # refusals already logged: each is logged once
        dues = core.dues
        self.promotion = dues.promotion
        self.sweep = dues.sweep
        self.retention = dues.retention
        self.repeats = dues.repeats
        self.rated = dues.rated
        self.history = core.history
        self._minute_timer: asyncio.TimerHandle | None = None
        core.on_reconfigure(self.reconfigure)

    # --- wiring -------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Look at every known queue once (after the store is loaded), then run each job
        when its Deadlines says so."""
        for _, queue in self._zset(QUEUES) or ():
            self.watch(queue)
        self.promotion.start(loop, self._promote)
        self.sweep.start(loop, self._sweep)
        self.retention.start(loop, self._trim)
        self.repeats.start(loop, self._repeat)
        self.rated.start(loop, self._release)
        self._arm_minute(loop)

    def watch(self, queue: bytes) -> None:
        """Note when each job of `queue` is due, from the store (at start, and in cluster
        mode when a front takes the queue)."""
        now = clock.now_ms()
        keys = queue_keys(queue)
        self._note_next(self.promotion, keys.scheduled, queue, now)
        if self.sweep_interval:
            self._note_next(self.sweep, keys.active, queue, now)
        self.retention.note(queue, now)
        self._note_next(self.rated, keys.rated, queue, now)
        self._note_next(self.repeats, keys.repeats, queue, now)
        try:  # where its history's counts start from (emqd/commit/history.py)
            self.history.note_base(queue, minute_close.counters(self.core.keyspace, keys,
                                                                (0, 0, 0)))
        except ReplyError:
            pass  # a counter key of the other type: its minutes' close says so then

    def reconfigure(self, old: Config, new: Config) -> None:
        """CONFIG SET of a setting housekeeping acts on.

        `stalled-interval`: 0 stops the sweep (a due queue is passed over); from 0
        to another value, every queue's earliest lease is looked up again, as at
        start. Lowered server defaults of retention (`keep-completed`,
        `keep-dead`, or an age limit `keep-*-ms` set or shortened): every queue is
        trimmed again, in slices, as after a
        queue's own `EMQ.CONFIG SET` (a queue with settings of its own costs one
        empty slice). Every other setting is read from `core.config` when used.
        """
        now = clock.now_ms()
        if new.stalled_interval != old.stalled_interval:
            was_on, self.sweep_interval = self.sweep_interval, new.stalled_interval
            if self.sweep_interval and not was_on:
                for _, queue in self._zset(QUEUES) or ():
                    self._note_next(self.sweep, queue_keys(queue).active, queue, now)
        if (new.keep_completed < old.keep_completed or new.keep_dead < old.keep_dead
                or _tighter(old.keep_completed_ms, new.keep_completed_ms)
                or _tighter(old.keep_dead_ms, new.keep_dead_ms)):
            for _, queue in self._zset(QUEUES) or ():
                self.retention.note(queue, now)

    def stop(self) -> None:
        for deadlines in self.core.dues.all():
            deadlines.stop()
        if self._minute_timer is not None:
            self._minute_timer.cancel()
            self._minute_timer = None

    # --- the metrics history ------------------------------------------------------------
    def _arm_minute(self, loop: asyncio.AbstractEventLoop) -> None:
        """The next close, just after the current minute ends."""
        wait_ms = minutes.MINUTE_MS - clock.now_ms() % minutes.MINUTE_MS + CLOSE_DELAY_MS
        self._minute_timer = loop.call_later(wait_ms / 1000, self._minute_ended, loop)

    def _minute_ended(self, loop: asyncio.AbstractEventLoop) -> None:
        self._arm_minute(loop)
        self._close(self.history.ended(clock.now_ms() // minutes.MINUTE_MS), loop)

    def _close(self, ended: list[OpenMinute], loop: asyncio.AbstractEventLoop | None) -> None:
        """Close `ended` (CLOSES_PER_TURN a loop turn, the rest at the next; all of them now
        without a loop: at shutdown)."""
        now = clock.now_ms()
        for done, minute in enumerate(ended):
            if loop is not None and done == CLOSES_PER_TURN:
                loop.call_soon(self._close, ended[done:], loop)
                return
            queue = minute.queue
            if not self.core.holds(queue):
                continue  # a queue this process lost (one let go was closed first)
            args = minute_close.CloseArgs(queue_keys(queue), minute.minute,
                                          self.history.base_of(queue),
                                          minutes.percentiles(minute.wait),
                                          minutes.percentiles(minute.run))
            try:
                base = self._commit(minute_close.plan(args, self.core.keyspace, now,
                                                      self.core.epoch_of(queue)))
            except ReplyError as error:
                self._refused("metrics history", queue, None, error)
                continue
            self.history.base[queue] = base

    def close_minutes(self, queue: bytes | None = None) -> None:
        """Close every minute still open, the current one too, so that what it saw is kept:
        every queue's at shutdown (a restart then starts each queue's counts from its
        counters); one queue's when, in cluster mode, this front lets it go (front.py
        `release`: the next owner starts from the counters it loads)."""
        if queue is None:
            self._close(self.history.ended(clock.now_ms() // minutes.MINUTE_MS + 1), None)
        else:
            self._close(self.history.taken(queue), None)

    # --- the three jobs -----------------------------------------------------------
    def _promote(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices("promotion", self.planners.promote, queue, keys.scheduled,
                             now, RETRY_MS, self.promotion)
        if reply is not None:
            self.counters.promoted += reply

    def _sweep(self, queue: bytes, now: int) -> None:
        if not self.sweep_interval:
            return
        wait_ms = self.core.sink.sweep_delay_ms(queue)
        if wait_ms:  # the store could not be written lately: that time is not the workers'
            self.sweep.hold(queue, now + wait_ms)
            return
        keys = queue_keys(queue)
        reply = self._slices("stall sweep", self.planners.stalled, queue, keys.active,
                             now, self.sweep_interval, self.sweep)
        if reply is not None:
            recovered, dead, *rest = reply
            self.counters.stall_recovered += len(recovered)
            self.counters.stall_dead += len(dead)
            for job, error in rest[0] if rest else ():  # corrupt rows dead-lettered
                self.counters.stall_quarantined += 1
                log.warning("housekeeping: the stall sweep dead-lettered queue %r job %r, "
                            "whose row is corrupt: %s", queue.decode(errors="replace"),
                            job.decode(errors="replace"), error.decode(errors="replace"))

    def _trim(self, queue: bytes, now: int) -> None:
        retention = self.planners.retention
        core = self.core
        try:
            result = retention.plan(retention.slice_args(queue, core.config), core.keyspace, now,
                                    core.epoch_of(queue))
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
                at = next_aging(self.core.keyspace, queue_keys(queue), self.core.config)
            except ReplyError:
                at = None  # a corrupt setting: the slice above was refused the same way
            if at is not None:
                self.retention.note(queue, max(at, now + 1))

    def _repeat(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices("schedules", self.repeat_planner,
                             queue, keys.repeats, now, RETRY_MS, self.repeats, REPEAT_SLICE)
        if reply is not None:
            self.counters.repeated += reply

    def _release(self, queue: bytes, now: int) -> None:
        keys = queue_keys(queue)
        reply = self._slices("rate windows", self.release_planner,
                             queue, keys.rated, now, RETRY_MS, self.rated)
        if reply is not None:
            self.counters.released += reply

    # --- one slice of a queue's due members -----------------------------------------
    def _slices(self, name: str, verb: ModuleType, queue: bytes, zkey: bytes, now: int,
                retry_ms: int, deadlines: Deadlines, size: int = SLICE) -> Any:
        """Run one slice on `zkey`'s due members; note when to come back. The reply, or None."""
        first = self._first_due(zkey, now)
        if first is None:
            self._note_next(deadlines, zkey, queue, now)
            return None
        try:
            reply = self._commit(self._plan(verb, queue, size, now))
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

    def _plan(self, verb: ModuleType, queue: bytes, limit: int, now: int) -> Any:
        core = self.core
        args = verb.slice_args(queue, limit, core.config)
        return verb.plan(args, core.keyspace, now, core.epoch_of(queue))

    def _refused_slice(self, name: str, verb: ModuleType, queue: bytes, zkey: bytes,
                       now: int, error: ReplyError, size: int = SLICE) -> Any:
        """Find the member that refuses the slice, apply the members before it, log it once.

        Returns the reply of the members applied, or None.
        """
        members = self._due_members(zkey, now, size)
        culprit = reply = None
        if members and self._refuses(verb, queue, len(members), now):
            low, high = 1, len(members)  # the shortest refused LIMIT: its last member
            while low < high:
                middle = (low + high) // 2
                if self._refuses(verb, queue, middle, now):
                    high = middle
                else:
                    low = middle + 1
            culprit = members[low - 1]
            if low > 1:
                reply = self._commit(self._plan(verb, queue, low - 1, now))
        self._refused(name, queue, culprit, error)
        return reply

    def _refuses(self, verb: ModuleType, queue: bytes, limit: int, now: int) -> bool:
        try:
            self._plan(verb, queue, limit, now)
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
            self.core.commit.apply(result)
            self.wake()
            return result.reply
        return result

    def _zset(self, key: bytes) -> ZSet | None:
        try:
            return self.core.keyspace.zset(key)
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
            deadlines.note(queue, max(score_ms(first[0]), now))


def _tighter(old_ms: int, new_ms: int) -> bool:
    """Whether a new age limit (0: none) keeps fewer rows than the old one."""
    return new_ms != 0 and (old_ms == 0 or new_ms < old_ms)


def _schedules_and_rates(planners: Planners) -> tuple[ModuleType, ModuleType]:
    """The planners of the schedules' jobs and of the lanes' rate windows: the ones given,
    else the verbs' own (a test's Planners of the first three leaves them out)."""
    from emqd.verbs import rate_release, repeat_fire

    return planners.repeat or repeat_fire, planners.release or rate_release


def default_planners() -> Planners:
    """The verbs' own planners (imported here: the verbs import nothing of this module)."""
    from emqd.rules import retention
    from emqd.verbs import promote, rate_release, repeat_fire, stalled_check

    return Planners(promote, stalled_check, retention, repeat_fire, rate_release)
