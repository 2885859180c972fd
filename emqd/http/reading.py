"""What the dashboard and /metrics read from the store: the one module that reads it.

Every figure is read the way the verbs read (the keyspace's `hash` and
`zset`, or one walk of a sorted set), synchronously, so a page or a scrape sees one
consistent keyspace, like a verb. The costs are the issue's:

- `queue_figures` is O(1) per queue (set sizes, a few hash fields, the heads
  of two sets for the latency): a scrape or the overview is O(queues).
- `job_page` is O(log n + page); `search_payloads` looks at no more than
  SEARCH_ROWS rows and SEARCH_BYTES payload bytes per call.

Why not EMQ.STATS's planner: a verb must refuse when a stored counter is not
an integer (protocol section 14, decision 2), and that would take every
figure of the queue out of a scrape. Here a stored value a client's HSET made
unreadable (not an integer, or a key of the other type) is read as None and
only that figure is skipped: /metrics leaves its series out (Prometheus reads
a missing sample as unknown, where 0 would read as a counter reset) and the
dashboard shows `?`.

The counters and where the core keeps them:

    added_total       meta            added
    completed_total   metrics:completed count
    dead_total        metrics:failed  count      (jobs that died; also STATS' failed_total)
    failures_total    metrics         failed     (every EMQ.FAIL)
    retried_total     metrics         retried    (FAILs that scheduled a retry)
    stalled_total     metrics         stalled    (counted stall recoveries)
    revived_total     metrics         revived
    cancelled_total   metrics         cancelled  (jobs EMQ.CANCEL ended)

EMQ.STATS gives each under the same name, /metrics as `emqd_jobs_<name>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from emqd.compat.numbers import parse_int
from emqd.errors import ReplyError
from emqd.layout import QUEUES, QueueKeys, queue_keys
from emqd.rules import job_log, rates
from emqd.rules.lanes import FLAT, LANES_PENDING
from emqd.rules.minutes import Minute
from emqd.store import hash as hashes
from emqd.store.keyspace import Keyspace
from emqd.store.zset import ZSet
from emqd.verbs import beat, metrics, repeats
from emqd.verbs import children as children_verb
from emqd.verbs.pause import PAUSED, is_paused

STATES = ("pending", "active", "scheduled", "waiting", "dead", "completed", "cancelled")
COUNTERS = ("added", "completed", "failures", "retried", "dead", "stalled", "revived",
            "cancelled")
SEARCH_ROWS = 10_000  # rows one payload search looks at, at most
SEARCH_BYTES = 64 << 20  # payload bytes one search compares, at most


def counter_fields(keys: QueueKeys) -> dict[str, tuple[bytes, bytes]]:
    metrics = keys.metrics
    return {
        "added": (keys.meta, b"added"),
        "completed": (keys.metrics_completed, b"count"),
        "failures": (metrics, b"failed"),
        "retried": (metrics, b"retried"),
        "dead": (keys.metrics_failed, b"count"),
        "stalled": (metrics, b"stalled"),
        "revived": (metrics, b"revived"),
        "cancelled": (metrics, b"cancelled"),
    }


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue's figures; None is a figure that could not be read (see the module doc)."""

    name: bytes
    counts: dict[str, int | None]  # state -> jobs (pending: the flat queue and the lanes)
    totals: dict[str, int | None]  # COUNTERS -> value
    latency_ms: int | None  # age of the job CLAIM would hand out next; 0 when none waits
    paused: bool
    lanes_active: int | None  # lanes with at least one active job
    lanes_ready: int | None  # lanes with waiting jobs and a free slot


def _zset(keyspace: Keyspace, key: bytes) -> ZSet | None:
    """The sorted set at `key`; None when absent or when the key holds a hash."""
    try:
        return keyspace.zset(key)
    except ReplyError:
        return None


def _zcard(keyspace: Keyspace, key: bytes) -> int | None:
    """ZCARD: 0 when absent, None when the key holds a hash (WRONGTYPE)."""
    if keyspace.type_name(key) == "hash":
        return None
    zset = keyspace.zset(key)
    return 0 if zset is None else len(zset)


def _hget(keyspace: Keyspace, key: bytes, name: bytes) -> bytes | None:
    """HGET: None when absent, or when the key holds a sorted set."""
    try:
        row = keyspace.hash(key)
    except ReplyError:
        return None
    return None if row is None else hashes.get(row, name)


def _front(keyspace: Keyspace, key: bytes) -> bytes | None:
    """The lowest-scored member of the sorted set at `key`, if any."""
    zset = _zset(keyspace, key)
    return None if zset is None else zset.first_member()


def _integer(value: bytes | None) -> int | None:
    """A stored counter: absent is 0, a value that is not an integer is None."""
    if value is None:
        return 0
    return parse_int(value)


def queue_names(keyspace: Keyspace) -> list[bytes]:
    """Every queue of `emq:queues`, in creation order (EMQ.QUEUES' order)."""
    queues = _zset(keyspace, QUEUES)
    return [] if queues is None else list(queues.members())


def queue_exists(keyspace: Keyspace, queue: bytes) -> bool:
    """Listed in `emq:queues`, or steered before its first job (it has a `meta`)."""
    queues = _zset(keyspace, QUEUES)
    if queues is not None and queue in queues:
        return True
    return keyspace.type_name(queue_keys(queue).meta) != "none"


def queue_figures(keyspace: Keyspace, queue: bytes, now_ms: int) -> QueueFigures:
    keys = queue_keys(queue)
    counts: dict[str, int | None] = {
        state: _zcard(keyspace, getattr(keys, state)) for state in STATES
    }
    lanes_pending = _integer(_hget(keyspace, keys.meta, LANES_PENDING))
    flat = counts["pending"]
    counts["pending"] = None if flat is None or lanes_pending is None else flat + lanes_pending
    totals = {
        name: _integer(_hget(keyspace, key, field))
        for name, (key, field) in counter_fields(keys).items()
    }
    ring = _zcard(keyspace, keys.ring)
    ring_head = _front(keyspace, keys.ring)
    lanes_ready = None if ring is None else ring - (1 if _in_ring(keyspace, keys) else 0)
    return QueueFigures(
        name=queue,
        counts=counts,
        totals=totals,
        latency_ms=_latency(keyspace, keys, ring_head, now_ms),
        paused=is_paused(_hget(keyspace, keys.meta, PAUSED)),
        lanes_active=_hash_size(keyspace, keys.gactive),
        lanes_ready=lanes_ready,
    )


def rate_counters(keyspace: Keyspace, queue: bytes) -> tuple[int | None, int | None]:
    """(completed_total, failures_total): what the overview's per-minute charts sample."""
    fields = counter_fields(queue_keys(queue))
    completed, failures = (_integer(_hget(keyspace, *fields[name]))
                           for name in ("completed", "failures"))
    return completed, failures


def _hash_size(keyspace: Keyspace, key: bytes) -> int | None:
    """HLEN: 0 when absent, None when the key holds a sorted set."""
    if keyspace.type_name(key) == "zset":
        return None
    row = keyspace.hash(key)
    return 0 if row is None else hashes.length(row)


def _in_ring(keyspace: Keyspace, keys: QueueKeys) -> bool:
    """Whether the flat queue is a member of the ring (it is then not a lane)."""
    ring = _zset(keyspace, keys.ring)
    return ring is not None and FLAT in ring


def _latency(keyspace: Keyspace, keys: QueueKeys, ring_head: bytes | None,
             now_ms: int) -> int | None:
    """How long the job CLAIM would hand out next has been claimable (now - `ready_ms`,
    else `created_ms`): a delayed job counts from its due time, not its creation.

    The fronts looked at: `pending`'s, and, when the next turn is a lane's,
    that lane's. For a queue without priorities that is the oldest claimable
    job; with them it is the one that waits to be served next. 0 when no job
    waits; None when the front row's `created_ms` is unreadable.
    """
    fronts = [keys.pending]
    if ring_head is not None and ring_head != FLAT:
        fronts.append(keys.lane(ring_head))
    oldest: int | None = None
    for front in fronts:
        head = _front(keyspace, front)
        if head is None:
            continue
        row_key = keys.job(head)
        ready = _hget(keyspace, row_key, b"ready_ms") or _hget(keyspace, row_key, b"created_ms")
        ready_ms = None if ready is None else parse_int(ready)
        if ready_ms is None:
            return None
        oldest = ready_ms if oldest is None else min(oldest, ready_ms)
    return 0 if oldest is None else max(0, now_ms - oldest)


# --- what a queue's page shows beside its jobs ------------------------------------------
SCHEDULES_SHOWN = 100  # a queue's page lists its first schedules (EMQ.REPEATS has them all)
CHILDREN_SHOWN = 200  # a parent's page lists its first children


def schedules(keyspace: Keyspace, queue: bytes) -> list[dict[str, Any]]:
    """The queue's first schedules, soonest first, as EMQ.REPEATS lists them (by field
    name as text: `name`, `next_ms`, `every` or `cron` and `tz`, `payload`, ...)."""
    try:
        listed = repeats.listing(keyspace, queue_keys(queue), SCHEDULES_SHOWN)
    except ReplyError:
        return []  # a key of the other type: EMQ.REPEATS says WRONGTYPE
    return [{name.decode(): value for name, value in entry.items()} for entry in listed]


def rate_limit(keyspace: Keyspace, queue: bytes) -> tuple[int, int] | None:
    """The queue's rate limit (MAX, PER_MS), None without one (or an unreadable one)."""
    try:
        rate = rates.queue_rate(keyspace.hash(queue_keys(queue).meta), queue)
    except ReplyError:
        return None
    return None if rate is None else (rate.max, rate.per_ms)


def history(keyspace: Keyspace, queue: bytes, start_ms: int, end_ms: int) -> list[Minute]:
    """The queue's recorded minutes that begin in [start_ms, end_ms], as EMQ.METRICS reads
    them; none when a client's write left them unreadable (EMQ.METRICS says why)."""
    try:
        return metrics.history(keyspace, queue_keys(queue), start_ms, end_ms)
    except ReplyError:
        return []


def worker_order(keyspace: Keyspace, queue: bytes, name: bytes) -> bytes:
    """What the worker named `name` is asked on `queue` (EMQ.BEAT's answer: run, quiet, stop);
    `run` when the key holds the other type."""
    return beat.order_of(_hget(keyspace, queue_keys(queue).workers, name))


def children(keyspace: Keyspace, queue: bytes, job_id: bytes) -> list[list[Any]]:
    """A flow's parent's first children, `[queue, id, state, result]` as EMQ.CHILDREN."""
    try:
        listed = children_verb.plan(children_verb.ChildrenArgs(queue_keys(queue), job_id),
                                    keyspace, 0, b"")
    except ReplyError:
        return []
    return listed[:CHILDREN_SHOWN] if isinstance(listed, list) else []


# --- jobs ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Listed:
    """One job of a list: its id, its score in the set, its row (None: a ghost)."""

    id: bytes
    score: float
    row: dict[Any, Any] | None


def set_key(queue: bytes, state: str) -> bytes:
    """The sorted set a state's jobs are listed in (pending: the flat queue)."""
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}")
    key: bytes = getattr(queue_keys(queue), state)
    return key


def job_page(keyspace: Keyspace, queue: bytes, state: str, offset: int,
             limit: int, lowest_first: bool = False) -> tuple[int, list[Listed]]:
    """(jobs in the set, the `limit` jobs from `offset`), newest first (highest score
    first), or `lowest_first`: for pending, the order claims take them in."""
    zset = _zset(keyspace, set_key(queue, state))
    if zset is None:
        return 0, []
    if lowest_first:
        pairs = zset.walk(offset, offset + limit)
    else:
        pairs = zset.walk(max(0, len(zset) - offset - limit), max(0, len(zset) - offset),
                          reverse=True)
    return len(zset), [Listed(member, score, job_row(keyspace, queue, member))
                       for score, member in pairs]


def ids_of(keyspace: Keyspace, queue: bytes, state: str) -> Iterator[bytes]:
    """The ids of a state's set, lowest score first, as they are walked (lazily)."""
    zset = _zset(keyspace, set_key(queue, state))
    return iter(()) if zset is None else zset.members()


def scored_before(keyspace: Keyspace, queue: bytes, state: str, before: int,
                  count: int) -> tuple[list[bytes], int]:
    """The ids of the first `count` jobs of a state scored at or before `before` (finished
    by then, for completed jobs), oldest first, and how many there are in all. O(log n +
    count)."""
    zset = _zset(keyspace, set_key(queue, state))
    if zset is None:
        return [], 0
    return zset.due(before, count), zset.end_of(before)


def oldest(keyspace: Keyspace, queue: bytes, state: str, count: int) -> list[bytes]:
    """The ids of the `count` lowest-scored jobs of a state (the oldest dead letters first)."""
    zset = _zset(keyspace, set_key(queue, state))
    return [] if zset is None else [member for _, member in zset.walk(0, count)]


def job_row(keyspace: Keyspace, queue: bytes, job_id: bytes) -> dict[Any, Any] | None:
    """A copy of the job's row; None when there is none (or the key is not a hash)."""
    try:
        row = keyspace.hash(queue_keys(queue).job(job_id))
    except ReplyError:
        return None
    return None if row is None else hashes.as_dict(row)


LOG_LINES_SHOWN = 500  # a job page shows its newest log lines


def log_lines(keyspace: Keyspace, queue: bytes, job_id: bytes) -> tuple[list[bytes], int]:
    """The job's newest LOG_LINES_SHOWN log lines (EMQ.LOGS' lines, oldest first), and how
    many it keeps in all."""
    log = _zset(keyspace, queue_keys(queue).log(job_id))
    if log is None:
        return [], 0
    total = len(log)
    shown = log.walk(max(0, total - LOG_LINES_SHOWN), total)
    return [job_log.line_of(member) for _, member in shown], total


def job_score(keyspace: Keyspace, queue: bytes, state: str, job_id: bytes) -> float | None:
    """The job's score in its state's set (a lease deadline, a due time, ...)."""
    if state not in STATES:
        return None
    zset = _zset(keyspace, set_key(queue, state))
    return None if zset is None else zset.score(job_id)


@dataclass(frozen=True, slots=True)
class Found:
    jobs: list[Listed]  # the matches, newest first
    scanned: int  # rows looked at in this call
    resume: int | None  # the offset to go on from, None when the set was searched to its end


def search_payloads(keyspace: Keyspace, queue: bytes, state: str, needle: bytes,
                    offset: int, limit: int) -> Found:
    """Jobs of one state whose payload contains `needle`, newest first, boundedly.

    Looks at rows from `offset` on and stops at `limit` matches, SEARCH_ROWS
    rows or SEARCH_BYTES payload bytes, whichever comes first; `resume` says
    where the next call goes on.
    """
    zset = _zset(keyspace, set_key(queue, state))
    if zset is None:
        return Found([], 0, None)
    size = len(zset)
    jobs: list[Listed] = []
    scanned = compared = 0
    position = offset
    top = max(0, size - offset)
    for score, member in zset.walk(max(0, top - SEARCH_ROWS), top, reverse=True):
        if len(jobs) >= limit or compared >= SEARCH_BYTES:
            break
        scanned += 1
        position += 1
        row = job_row(keyspace, queue, member)
        payload = (row or {}).get(b"payload", b"")
        compared += len(payload)
        if needle in payload:
            jobs.append(Listed(member, score, row))
    return Found(jobs, scanned, position if position < size else None)
