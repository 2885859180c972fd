"""(no command) Housekeeping's close of a queue's minute: its record into the queue's history.

At each minute's end, for each queue that had something happen in it
(emqd/commit/history.py), housekeeping runs this planner with the minute, its wait and
run times' percentile codes (from the events it saw), and the queue's counters
as they stood when the minute began (`base`); the planner reads the counters
now, and the minute's counts are the differences: the jobs completed
(`metrics:completed count`), the failures (`metrics failed`: every EMQ.FAIL) and
the jobs that died (`metrics:failed count`), so the history counts exactly
what /metrics and EMQ.STATS count. A counter that went down (FLUSHALL, a
client's HSET) counts as starting again from 0, as Prometheus reads a reset; an
unreadable one counts 0 and stays the base.

The record goes into `p.."minutes"` (rules/minutes.py, which says how it is
laid out and bounded): appended to `cur` when the minute is in its hour (a
second record of the same minute, after a restart within it, is merged into
the first), or `cur` moves on to the new hour and the hour it held joins `old`,
which loses the hours past the window and, past CAP bytes, its oldest. A
minute of an hour before `cur`'s (a wall clock that stepped back across a
restart) is dropped. A minute with nothing to record writes nothing. Fields
that a client's write left unreadable start again empty.

Returns (the plan's reply): the counters now, `(completed, failures, dead)`,
which housekeeping keeps as the next minute's base.
"""

from __future__ import annotations

from emqd.commit.plan import Op, Plan
from emqd.compat.numbers import parse_int
from emqd.layout import QueueKeys
from emqd.rules import minutes
from emqd.rules.minutes import Minute
from emqd.store import hash as hashes
from emqd.store.keyspace import View

Counters = tuple[int, int, int]  # completed, failures, dead: as the stored counters stand


class CloseArgs:
    """One queue's minute: its number (minutes since the epoch), the counters when it began,
    its wait and run times' percentile codes (None: no claim, no completion)."""

    __slots__ = ("keys", "minute", "base", "wait", "run")

    def __init__(self, keys: QueueKeys, minute: int, base: Counters,
                 wait: tuple[int, int, int] | None, run: tuple[int, int, int] | None) -> None:
        self.keys = keys
        self.minute = minute
        self.base = base
        self.wait = wait
        self.run = run


def counters(view: View, keys: QueueKeys, base: Counters) -> Counters:
    """The queue's three counters now; one that is unreadable keeps its `base` value."""
    found = []
    for (key, field), before in zip(((keys.metrics_completed, b"count"),
                                     (keys.metrics, b"failed"),
                                     (keys.metrics_failed, b"count")), base, strict=True):
        raw = view.hget(key, field)
        number = 0 if raw is None else parse_int(raw)
        found.append(before if number is None else number)
    return found[0], found[1], found[2]


def _increase(before: int, after: int) -> int:
    return after - before if after >= before else after


def plan(args: CloseArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    keys = args.keys
    now = counters(view, keys, args.base)
    counts = [_increase(before, after) for before, after in zip(args.base, now, strict=True)]
    if not any(counts) and args.wait is None and args.run is None:
        return Plan([], now, None, ())
    minute = Minute(args.minute, counts[0], counts[1], counts[2], args.wait, args.run)
    row = view.hash(keys.minutes)
    current = None if row is None else hashes.get(row, minutes.CURRENT)
    old = None if row is None else hashes.get(row, minutes.OLD)
    rolled = False  # `old` is written too: `cur` moves on to this hour, or they start again
    try:
        found = minutes.blocks(current)
        held = [] if not found else minutes.minutes_of(*found[0])
        minutes.blocks(old)
    except ValueError:  # a client's write: start again
        found, held, old, rolled = [], [], None, True
    hour = args.minute // minutes.HOUR_MINUTES
    if found and found[0][0] > hour:
        return Plan([], now, None, ())  # an hour before the latest: dropped
    if found and found[0][0] == hour:
        records = _placed(held, minute)
    else:
        records = [minute]
        if found:
            old = (old or b"") + minutes.block(*found[0])
            rolled = True
    new_current = minutes.block(hour, b"".join([minutes.record(one) for one in records]))
    fields = [minutes.CURRENT, new_current]
    if rolled or len(old or b"") + len(new_current) > minutes.CAP:
        fields += [minutes.OLD, minutes.kept(old, new_current)]
    ops: list[Op] = [(b"HSET", keys.minutes, *fields)]
    return Plan(ops, now, None, ())


def _placed(held: list[Minute], minute: Minute) -> list[Minute]:
    """The hour's minutes with `minute` in its place (merged with one of its own)."""
    out: list[Minute] = []
    placed = False
    for other in held:
        if not placed and other.minute == minute.minute:
            out.append(other.merged(minute))
            placed = True
        elif not placed and other.minute > minute.minute:
            out += [minute, other]
            placed = True
        else:
            out.append(other)
    if not placed:
        out.append(minute)
    return out
