"""When the server's clock work is due, learnt from what is committed, without polling.

The commit path (emqd/commit/path.py) hands every committed plan to `Dues.learn`. A
verb's plan says itself what housekeeping must know (`Plan.due`: a lease that
runs out, a job scheduled, a queue's settings changed), so its ops are not read
again; only a plain Redis command's plan (a client's own ZADD into
`scheduled`) is looked at op by op (`observe`: ZADD ops on keys ending in
`}:scheduled` / `}:active` / `}:repeats` / `}:rated`, writes to `}:config`).

For each kind of work `Dues` keeps one `Deadlines`: a heap of (time, queue)
with the earliest known time of each queue, and one loop timer on the heap's
top. A later deadline (an EXTEND) never adds an entry; an entry that turns out
early (its job was extended or removed) costs one empty pass, after which the
queue's true earliest time is read from the store. Housekeeping
(emqd/serve/housekeeping.py) starts the timers with the work each one runs; before
that (a store driven by tests) the deadlines are only noted.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable
from typing import Any

from emqd import clock
from emqd.commit.plan import AGING, CONFIGURED, LEASED, RATED, REPEATING, SCHEDULED, Op, Plan
from emqd.errors import ReplyError
from emqd.rules.args import queue_name

log = logging.getLogger("emqd")

RETRY_MS = 1000  # a refused slice (or a failed run) is tried again this much later
QUEUES_PER_TURN = 16  # queues served per timer run; the rest at the loop's next turn
MAX_TIMER_MS = 3_600_000  # a far due time is looked at again after an hour, not armed as is

_SCHEDULED = b"}:scheduled"
_ACTIVE = b"}:active"
_REPEATS = b"}:repeats"
_RATED = b"}:rated"
_CONFIG = b"}:config"
_PREFIX = b"emq:{"
_UNWATCHED = ()  # a ZADD key that feeds no Deadlines
TARGETS_MAX = 65_536  # keys remembered by `observe`; cleared when full
# A timer this short runs after the loop's next I/O poll. 0 would not: uvloop
# runs call_later(0) as call_soon, before the poll (tests/serve/test_housekeeping.py).
SETTLE_S = 0.001
# A timer that ran this much later than armed was held up by the loop itself.
LATE_MS = 100
MAX_GRACE_MS = 60_000  # the longest a held-up sweep waits before judging


def _nobody(queue: bytes, now_ms: int) -> None:
    """The work of Deadlines no housekeeping has started."""


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
    with that time as `now_ms`. A timer that fired late by L ms (past LATE_MS:
    one command held the loop) waits L ms rather than SETTLE_S: a heartbeat
    answered just before the hold had its reply held up with it, so its
    worker's next one comes only after the hold, and the hold is not the
    worker's (PROTOCOL.md 6.4).
    """

    def __init__(self, after_io: bool = False) -> None:
        self.due: Callable[[bytes, int], None] = _nobody
        self.after_io = after_io
        self.fired_at: int | None = None  # with after_io: the time a fired timer waits to judge
        self.heap: list[tuple[int, bytes]] = []
        self.earliest: dict[bytes, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: int | None = None
        self.expected_ms = 0  # when the armed timer should run (its lateness is the loop's)
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

    def start(self, loop: asyncio.AbstractEventLoop, due: Callable[[bytes, int], None]) -> None:
        """Arm the timer on `loop`; each queue whose time comes is handed to `due`."""
        self.due = due
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
        now = clock.now_ms()
        delay_ms = min(max(at - now, 0), MAX_TIMER_MS)
        self.timer_at = at
        self.expected_ms = now + delay_ms
        self.timer = self.loop.call_later(delay_ms / 1000.0, self._fire)

    def _fire(self) -> None:
        self.timer = self.timer_at = None
        now = clock.now_ms()
        if self.after_io:
            assert self.loop is not None  # stop() cancels the timer
            late_ms = now - self.expected_ms
            wait_s = min(late_ms, MAX_GRACE_MS) / 1000.0 if late_ms > LATE_MS else SETTLE_S
            self.fired_at = self.timer_at = now
            self.timer = self.loop.call_later(wait_s, self._settled)
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


class Dues:
    """The five kinds of clock work, each a `Deadlines`, fed by every committed plan.

    `sweeping` is whether the stall sweep is on (`--stalled-interval` not 0): when
    it is off, leases are not noted.
    """

    def __init__(self, sweeping: bool = True) -> None:
        self.sweeping = sweeping
        self.promotion = Deadlines()
        self.sweep = Deadlines(after_io=True)  # heartbeats in the sockets win
        self.retention = Deadlines()
        self.repeats = Deadlines()
        self.rated = Deadlines()
        self._targets: dict[bytes, Any] = {}  # ZADD key -> (Deadlines, queue) | _UNWATCHED

    def all(self) -> tuple[Deadlines, ...]:
        return (self.promotion, self.sweep, self.retention, self.repeats, self.rated)

    def set_sweeping(self, on: bool) -> None:
        """The sweep turned on or off (CONFIG SET stalled-interval)."""
        self.sweeping = on
        self._targets.clear()  # an `active` key's ZADD feeds the sweep, or no longer

    def learn(self, plan: Plan) -> None:
        """Called by the commit path with every applied plan that has something to say."""
        due = plan.due
        if due is None:
            self.observe(plan.ops)
            return
        for what, queue, at in due:
            if what == LEASED:
                if self.sweeping:
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
                at = score if type(score) is int else score_ms(float(score))
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
        elif key.endswith(_ACTIVE) and self.sweeping:
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

def _queue_of(key: bytes, suffix: int) -> bytes | None:
    """The queue of `emq:{QUEUE}` + suffix, or None for a key outside the EMQ keyspace."""
    if not key.startswith(_PREFIX):
        return None
    queue = key[len(_PREFIX) : -suffix]
    try:
        return queue_name(queue)
    except ReplyError:
        return None


def score_ms(score: float) -> int:
    """A score as the first whole millisecond at which `score <= now` holds."""
    if math.isinf(score):
        return 0 if score < 0 else 2**62
    return math.ceil(score)


