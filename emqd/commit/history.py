"""What the metrics history sees of the minute in progress, per queue, until housekeeping closes it.

The history's records (rules/minutes.py) are written once a minute per queue by
housekeeping (verbs/minute_close.py); what a record needs that the store does
not keep is gathered here, from the events of every committed plan (the commit
path's listener, `listen`):

- which queues had a claim, a completion, a failure or a death in the minute
  (only those are closed: an idle queue costs nothing, and a minute of ADDs
  alone has nothing to record);
- the wait times of its claims (`claimed` events' `wait_ms`) and the run times
  of its completions (`completed` events' `duration_ms`), each counted in a
  histogram of one-byte codes (rules/minutes.py `code`), whose percentiles
  the record keeps.

The counts (completed, failures, dead) are not counted here: the close reads the
stored counters, and `base` keeps each queue's counters as they stood when its
open minute began (read when the queue is taken up: housekeeping's `watch`, at
start and in cluster mode when a front takes a queue; a queue created after
that started at 0).

A minute belongs to the event's `ts` (the plan's time), so an event of the next
minute that comes before housekeeping closed the last starts a new one, and
the last waits in `closing`. Per event, the work is a dict lookup and, for a
claim or a completion, a code and a count: the listener is compiled with the
core. Nothing here is kept across a restart: what a minute saw before a crash
is lost (a clean shutdown closes every open minute first), and a minute's
counts from then on come from the counters, which are in the store.
"""

from __future__ import annotations

from typing import Final

from emqd.commit.events import CLAIMED, COMPLETED, DEAD, RETRY, Event
from emqd.rules.minutes import MINUTE_MS, code

Counters = tuple[int, int, int]  # completed, failures, dead
ZERO: Final[Counters] = (0, 0, 0)


class OpenMinute:
    """One queue's minute in progress: its wait and run times, as histograms of codes."""

    __slots__ = ("queue", "minute", "wait", "run")

    def __init__(self, queue: bytes, minute: int) -> None:
        self.queue = queue
        self.minute = minute  # minutes since the epoch
        self.wait: dict[int, int] = {}
        self.run: dict[int, int] = {}


class History:
    def __init__(self) -> None:
        self.open: dict[bytes, OpenMinute] = {}
        self.closing: list[OpenMinute] = []  # ended, not yet closed by housekeeping
        self.base: dict[bytes, Counters] = {}  # each queue's counters at its open minute's start

    def listen(self, happened: list[Event]) -> None:
        """The commit path's listener (`Commit.listen`): each event that moves a counter the
        history counts or carries a time it keeps, into its queue's minute. The others (an
        ADD's, above all) are passed over at their name."""
        for event in happened:
            name = event[0]
            if name == CLAIMED:
                _observe(self._minute(event).wait, event[4], "wait_ms")
            elif name == COMPLETED:
                _observe(self._minute(event).run, event[4], "duration_ms")
            elif name == RETRY or name == DEAD:
                self._minute(event)

    def _minute(self, event: Event) -> OpenMinute:
        """The open minute of the event's queue and time (one begun if need be)."""
        queue = event[1]
        minute = event[3] // MINUTE_MS
        current = self.open.get(queue)
        if current is None or current.minute != minute:
            if current is not None:
                self.closing.append(current)
            current = self.open[queue] = OpenMinute(queue, minute)
        return current

    def note_base(self, queue: bytes, counters: Counters) -> None:
        """A queue's counters as it is taken up (at start; in cluster mode when this front
        takes the queue, when what it knew of it from an earlier time is stale)."""
        self.base[queue] = counters

    def ended(self, before_minute: int) -> list[OpenMinute]:
        """The minutes to close: every one before `before_minute`, in the order they ended;
        taken out (housekeeping closes each once)."""
        done = self.closing
        self.closing = []
        for queue, current in list(self.open.items()):
            if current.minute < before_minute:
                done.append(current)
                del self.open[queue]
        return done

    def taken(self, queue: bytes) -> list[OpenMinute]:
        """Every minute of `queue` not closed yet, the one in progress too, taken out (in
        cluster mode the front is letting the queue go: they are closed while it can)."""
        done = [minute for minute in self.closing if minute.queue == queue]
        if done:
            self.closing = [minute for minute in self.closing if minute.queue != queue]
        current = self.open.pop(queue, None)
        return done if current is None else [*done, current]

    def base_of(self, queue: bytes) -> Counters:
        return self.base.get(queue, ZERO)


def _observe(histogram: dict[int, int], extra: object, field: str) -> None:
    if type(extra) is dict:
        ms = extra.get(field)
        if type(ms) is int:
            key = code(ms)
            histogram[key] = histogram.get(key, 0) + 1
