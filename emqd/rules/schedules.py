"""Repeatable jobs: a schedule's slots, and the schedule as its hash holds it.

A schedule is `EVERY ms` (slots at the multiples of ms since the Unix epoch,
so replacing a schedule by the same rule keeps its slots) or `CRON expr [TZ
zone]` (slots as croniter reads the expression, in the zone's wall clock
through zoneinfo; UTC without TZ). It is kept in `p.."repeat:"..NAME` (a
hash: `every`, or `cron` and `tz`; `payload`; the job options `priority`,
`max_attempts`, `backoff`, `group`, as a job row holds them, each checked
again when read; `created_ms`),
and `p.."repeats"` (a zset: NAME -> its next slot) is what housekeeping's
timer looks at. Slot times are pure functions of the rule and a time, so
planners can compute them: the next slot after a time, the latest at or
before it.
"""

from __future__ import annotations

import datetime
import math
import zoneinfo
from dataclasses import dataclass
from typing import Final

from croniter import CroniterError, croniter

from emqd import errors
from emqd.compat.numbers import MAX_TIME_MS, parse_int
from emqd.rules.args import is_queue_name
from emqd.rules.backoff import parse_backoff
from emqd.rules.enqueue import NewJob
from emqd.store import hash as hashes
from emqd.store.hash import Hash

# Typed: repeats.py reads these at import time (mypyc cannot infer them in the cycle).
EVERY: Final[bytes] = b"every"
CRON: Final[bytes] = b"cron"
TZ: Final[bytes] = b"tz"
PAYLOAD: Final[bytes] = b"payload"
CREATED_MS: Final = b"created_ms"
REPEAT: Final = b"repeat"  # the row field naming the schedule that added a job
NAME_MAX: Final = 200  # a job's id is NAME:SLOT_MS, at most 256 bytes
EXACT_MAX: Final = MAX_TIME_MS  # the last ms a double holds exactly
_UTC: Final = datetime.UTC


def schedule_name(raw: bytes) -> bytes:
    if not raw or len(raw) > NAME_MAX:
        raise errors.INVALID_SCHEDULE()
    return raw


def job_id(name: bytes, slot_ms: int) -> bytes:
    """The id of the job of one slot: the same slot can never add a second job."""
    return name + b":%d" % slot_ms


@dataclass(frozen=True, slots=True)
class Rule:
    """EVERY ms, or a cron expression in a zone."""

    every: int | None = None
    cron: str | None = None
    zone: str | None = None

    def next_after(self, ms: int) -> int:
        """The first slot strictly after `ms`."""
        if self.every is not None:
            return (ms // self.every + 1) * self.every
        return _cron_step(self, ms, forward=True)

    def latest_at(self, ms: int) -> int:
        """The last slot at or before `ms`."""
        if self.every is not None:
            return ms // self.every * self.every
        return _cron_step(self, ms + 1, forward=False)

    def fields(self) -> list[bytes]:
        if self.every is not None:
            return [EVERY, b"%d" % self.every]
        assert self.cron is not None
        out = [CRON, self.cron.encode()]
        if self.zone is not None:
            out += [TZ, self.zone.encode()]
        return out


def _zone(name: str | None) -> datetime.tzinfo:
    return _UTC if name is None else zoneinfo.ZoneInfo(name)


def _cron_step(rule: Rule, ms: int, forward: bool) -> int:
    """croniter's next slot after `ms` (or the last one before it), as ms."""
    start = datetime.datetime.fromtimestamp(ms / 1000, _zone(rule.zone))
    it = croniter(rule.cron, start)
    when: datetime.datetime = (it.get_next(datetime.datetime) if forward
                               else it.get_prev(datetime.datetime))
    return math.floor(when.timestamp() * 1000 + 0.5)


def every_rule(raw: bytes) -> Rule:
    every = parse_int(raw)
    if every is None or every <= 0:
        raise errors.must_be_positive("EVERY")()
    return Rule(every=every)


def cron_rule(expr: bytes, zone: bytes | None, now_ms: int) -> Rule:
    """A cron rule checked by the libraries: a bad expression is refused with croniter's
    reason, a bad zone with its name; an expression with no slot ahead is refused too."""
    try:
        zone_name = None if zone is None else zone.decode("ascii")
        if zone_name is not None:
            zoneinfo.ZoneInfo(zone_name)
    except (UnicodeDecodeError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise errors.invalid_zone(zone or b"") from None
    try:
        text = expr.decode("ascii")
    except UnicodeDecodeError:
        raise errors.invalid_cron("not ASCII") from None
    rule = Rule(cron=text, zone=zone_name)
    try:
        rule.next_after(now_ms)
    except (CroniterError, ValueError, OverflowError) as error:
        raise errors.invalid_cron(str(error) or type(error).__name__) from None
    return rule


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as its hash holds it."""

    rule: Rule
    payload: bytes
    options: dict[bytes, bytes]  # the job options present, checked

    def job(self, name: bytes) -> NewJob:
        """The job of one slot: the payload, the options, `repeat` = the schedule's name."""
        options = self.options
        priority = options.get(b"priority")
        max_attempts = options.get(b"max_attempts")
        return NewJob(self.payload, None if priority is None else int(priority),
                      None if max_attempts is None else int(max_attempts),
                      options.get(b"backoff"), options.get(b"group"), [REPEAT, name])


def read(name: bytes, row: Hash) -> Schedule:
    """The stored schedule; a hash a client's HSET made unreadable refuses the plan (its
    cron expression is checked when its slots are computed: `slots`)."""
    every = hashes.get(row, EVERY)
    cron = hashes.get(row, CRON)
    payload = hashes.get(row, PAYLOAD)
    zone = hashes.get(row, TZ)
    if payload is None or (every is None) == (cron is None):
        raise errors.corrupt_schedule(name)
    try:
        if every is not None:
            rule = every_rule(every)
        else:
            assert cron is not None  # one of the two, checked above
            rule = Rule(cron=cron.decode("ascii"),
                        zone=None if zone is None else zone.decode("ascii"))
    except (errors.ReplyError, UnicodeDecodeError):
        raise errors.corrupt_schedule(name) from None
    options: dict[bytes, bytes] = {}
    for field, valid in _OPTIONS.items():
        value = hashes.get(row, field)
        if value is not None:
            if not valid(value):
                raise errors.corrupt_schedule(name)
            options[field] = value
    return Schedule(rule, payload, options)


def slots(name: bytes, rule: Rule, now_ms: int) -> tuple[int, int]:
    """(the latest slot at or before `now_ms`, the first after it); a rule whose slots
    cannot be computed (a stored expression croniter refuses) refuses the plan."""
    try:
        latest, following = rule.latest_at(now_ms), rule.next_after(now_ms)
    except (CroniterError, ValueError, OverflowError, zoneinfo.ZoneInfoNotFoundError):
        raise errors.corrupt_schedule(name) from None
    if not fits(following):
        raise errors.corrupt_schedule(name)
    return latest, following


def _priority(raw: bytes) -> bool:
    value = parse_int(raw)
    return value is not None and -1000 <= value <= 1000


def _positive(raw: bytes) -> bool:
    value = parse_int(raw)
    return value is not None and value > 0


_OPTIONS: Final = {
    b"priority": _priority,
    b"max_attempts": _positive,
    b"backoff": lambda raw: parse_backoff(raw) is not None,
    b"group": is_queue_name,  # a group follows the queue's rule
}


def fits(slot_ms: int) -> bool:
    """Whether a slot is a time a score holds exactly (a double: up to 2^53 ms, the year
    285 000), so that its id and its score name the same instant."""
    return 0 <= slot_ms <= EXACT_MAX
