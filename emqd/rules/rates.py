"""Rate limits (EMQ.RATE, EMQ.LANE.RATE): at most MAX claims in any window of PER_MS.

A limit is a sliding window over the claims themselves, kept in the store so
that a restart does not reset it, written by the plans like everything else:

- the queue's limit: `meta` fields `rate_max` and `rate_per_ms` (CLAIM reads
  `meta` anyway, so a queue without a limit costs one field lookup), and its
  window `p.."rate:claims"`: a zset of the claims of the last PER_MS, member
  `<id>:<token>`, score the claim's time;
- a lane's limit: `p.."grate"` (hash: group -> `MAX:PER_MS`, beside
  `glimit`'s concurrency) and its window `p.."rate:lane:"..GROUP`; a lane
  whose window is full is out of the ring (lanes.py: it cannot be served
  now) and waits in `p.."rated"` (zset: group -> the time its window has
  room again) until housekeeping puts it back (verbs/rate_release.py).

A claim at `now` is allowed while fewer than MAX claims of the window have a
time after `now - PER_MS`: so in any span of PER_MS there are at most MAX.
Entries that left the window are deleted by the next plan that claims (at
most PRUNE of them per plan, so a long pause never makes one plan large).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from emqd import errors
from emqd.commit.plan import Op
from emqd.compat.numbers import parse_int
from emqd.store import hash as hashes
from emqd.store.hash import Hash
from emqd.store.keyspace import View
from emqd.store.zset import ZSet

MAX: Final = b"rate_max"  # meta field: the queue's MAX
PER_MS: Final = b"rate_per_ms"  # meta field: the queue's PER_MS
PRUNE: Final = 1000  # entries that left a window deleted by one plan, at most


@dataclass(frozen=True, slots=True)
class Rate:
    max: int
    per_ms: int

    def stored(self) -> bytes:
        """A lane's limit as `grate` holds it."""
        return b"%d:%d" % (self.max, self.per_ms)


def _positive(raw: bytes | None) -> int | None:
    value = None if raw is None else parse_int(raw)
    return value if value is not None and value > 0 else None


def queue_rate(meta: Hash | None, queue: bytes) -> Rate | None:
    """The queue's limit from its `meta` row; None when it has none."""
    if meta is None:
        return None
    raw_max = hashes.get(meta, MAX)
    if raw_max is None:
        return None
    limit, per = _positive(raw_max), _positive(hashes.get(meta, PER_MS))
    if limit is None or per is None:
        raise errors.corrupt_rate(b"queue '" + queue + b"'")
    return Rate(limit, per)


def parse_lane_rate(raw: bytes, group: bytes) -> Rate:
    """A lane's limit as `grate` holds it (`MAX:PER_MS`); a corrupt one refuses the verb."""
    head, _, tail = raw.partition(b":")
    limit, per = _positive(head), _positive(tail)
    if limit is None or per is None:
        raise errors.corrupt_rate(b"lane '" + group + b"'")
    return Rate(limit, per)


class Window:
    """One limit's window at `now`, as one plan sees and changes it.

    `free`: the claims it still allows now; `take(member)` spends one (the
    plan adds `member` at `now`); `ops()` writes what changed (the entries
    that left the window deleted, the new ones added); `frees_at()` is when
    it has room again once it is full.
    """

    __slots__ = ("key", "rate", "now", "log", "gone", "free", "added")

    def __init__(self, view: View, key: bytes, rate: Rate, now_ms: int) -> None:
        self.key = key
        self.rate = rate
        self.now = now_ms
        self.log: ZSet | None = view.zset(key)
        log = self.log
        outside = 0 if log is None else log.end_of(now_ms - rate.per_ms)  # left the window
        self.gone = 0 if log is None else outside
        inside = 0 if log is None else len(log) - outside
        self.free = max(rate.max - inside, 0)
        self.added: list[bytes] = []

    def take(self, member: bytes) -> None:
        self.added.append(member)
        self.free -= 1

    def frees_at(self) -> int:
        """When a claim is allowed again (now, if it is allowed now)."""
        if self.free > 0:
            return self.now
        log = self.log
        inside = (0 if log is None else len(log) - self.gone) + len(self.added)
        # the window has room once its (inside - MAX + 1) oldest claims have left it
        rank = self.gone + inside - self.rate.max
        oldest = None
        if log is not None and rank < len(log):
            oldest = next(log.walk(rank, rank + 1), None)
        at = self.now if oldest is None else math.ceil(oldest[0])
        return at + self.rate.per_ms

    def ops(self) -> list[Op]:
        """The window's writes when the plan claimed (a claim that takes nothing writes
        nothing: the entries that left the window go with the next claim)."""
        ops: list[Op] = []
        if not self.added:
            return ops
        if self.gone and self.log is not None:
            ops.append((b"ZREM", self.key, *(m for _, m in self.log.walk(0, min(self.gone,
                                                                                PRUNE)))))
        if self.added:
            zadd: list[bytes | int] = [b"ZADD", self.key]
            for member in self.added:
                zadd += [self.now, member]
            ops.append(tuple(zadd))
        return ops


def claim_member(job_id: bytes, token: bytes) -> bytes:
    """A window's entry for one claim: unique, since every claim has a new token."""
    return job_id + b":" + token
