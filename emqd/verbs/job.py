"""What the job verbs share, written once: the holder's guard, where a job
(re-)enters, and the ops that take a job out of `active` or finish it.

Lanes (protocol section 8) change two answers here: `entry_key` (a lane job
enters its lane, not `pending`), and the bookkeeping that goes with entering
and leaving `active`: `enter_ops` and `leave_active_ops` note each move on
the plan's `lanes.Ledger`, and the verb adds `lanes.settle(ledger, reads)`
(the slot back, the ring, the counters) to its plan. Every verb asks these
helpers instead of naming `pending` or `active` itself.

The helpers that need store values take the runner's `reads` and return a
`Need` when a read is missing, like `decide` does.
"""

from __future__ import annotations

from emqd import errors
from emqd.keys import QueueKeys
from emqd.numbers import parse_int
from emqd.plan import Op
from emqd.store.hash import incremented
from emqd.verbs import lanes, retention
from emqd.verbs.backoff import Backoff, parse_backoff
from emqd.verbs.runner import HGET, HGETALL, ZCARD, ZSCORE, Need, Reads, need

PRIORITY_BAND = 1 << 40  # score = priority * 2^40 + seq (protocol section 3)

ATTEMPTS = b"attempts"
FAILURES = b"failures"
STALLED = b"stalled"
STATE = b"state"
LEASE_EPOCH = b"lease_epoch"
LAST_ERROR = b"last_error"
FINISHED_MS = b"finished_ms"

PENDING = b"pending"
ACTIVE = b"active"
SCHEDULED = b"scheduled"
DEAD = b"dead"
COMPLETED = b"completed"


def row_read(keys: QueueKeys, job_id: bytes) -> tuple:
    return (HGETALL, keys.job(job_id))


# --- the holder's guard (COMPLETE, FAIL, REQUEUE, EXTEND) -----------------------------
def held(
    keys: QueueKeys, job_id: bytes, token: bytes, reads: Reads, ahead: tuple = ()
) -> Need | dict:
    """The row of the job `token` holds, or raises EMQSTALE (the seed's decide_fail order).

    No `attempts` (no row, or never claimed) -> `job gone`; `attempts` differs
    from the token, as bytes -> `token mismatch`; the token matches but the job
    is not held (state not `active`, or not in `active`) -> `job not active`.
    A row key holding a sorted set answers WRONGTYPE (the read raises it).
    `ahead`: the caller's next reads, asked for in the same round (runner.py).
    """
    row_r = row_read(keys, job_id)
    score_r = (ZSCORE, keys.active, job_id)
    if row_r not in reads:
        return need(row_r, score_r, ahead=ahead)
    row = reads[row_r]
    attempts = None if row is None else row.get(ATTEMPTS)
    if attempts is None:
        raise errors.STALE_GONE()
    if attempts != token:
        raise errors.STALE_TOKEN()
    if row.get(STATE) != ACTIVE or reads[score_r] is None:
        raise errors.STALE_NOT_ACTIVE()
    return row


# --- the row's own settings, validated (rule 1: a plan cannot fail halfway) ----------
def priority(row: dict) -> int:
    raw = row.get(b"priority")
    if raw is None:
        return 0
    value = parse_int(raw)
    if value is None or not -1000 <= value <= 1000:
        raise errors.corrupt_job_field(b"priority")
    return value


def max_attempts(row: dict) -> int | None:
    raw = row.get(b"max_attempts")
    if raw is None:
        return None
    value = parse_int(raw)
    if value is None or value <= 0:
        raise errors.corrupt_job_field(b"max_attempts")
    return value


def backoff(row: dict) -> Backoff | None:
    raw = row.get(b"backoff")
    if raw is None:
        return None
    rule = parse_backoff(raw)
    if rule is None:
        raise errors.corrupt_job_field(b"backoff")
    return rule


# --- where a job enters ----------------------------------------------------------------
def entry_key(keys: QueueKeys, row: dict) -> bytes:
    """The set a waiting job sits in: `pending`, or a lane job's lane."""
    return lanes.waiting_key(keys, lanes.group_of(row))


def entry_check(keys: QueueKeys, row: dict) -> tuple:
    """The read that makes sure the entry set is a sorted set before a plan ZADDs to it."""
    return (ZCARD, entry_key(keys, row))


def first_entry_score(row: dict, seq: int) -> int:
    """ADD, or PROMOTE of a job never claimed: the back of its priority band."""
    return priority(row) * PRIORITY_BAND + seq


def reentry_score(row: dict) -> int:
    """REQUEUE, stall recovery, PROMOTE of a job claimed before, REVIVE: the front."""
    return priority(row) * PRIORITY_BAND


def enter_ops(keys: QueueKeys, job_id: bytes, row: dict, score: int, *fields: bytes,
              ledger: lanes.Ledger) -> list[Op]:
    """`state pending` (with `fields` written first) and the ZADD to its entry set.

    The move is noted on `ledger`; the verb's plan must include `lanes.settle`.
    """
    ledger.enter(lanes.group_of(row))
    return [
        (b"HSET", keys.job(job_id), *fields, STATE, PENDING),
        (b"ZADD", entry_key(keys, row), score, job_id),
    ]


def leave_active_ops(keys: QueueKeys, job_id: bytes, row: dict | None,
                     ledger: lanes.Ledger) -> list[Op]:
    """A job leaves `active`; a lane job's slot given back is noted on `ledger`."""
    ledger.leave_active(lanes.group_of(row))
    return [(b"ZREM", keys.active, job_id)]


# --- finishing: the set entry, the metric, the retention trim --------------------------
def finish_ops(
    keys: QueueKeys, kind: bytes, ids: list[bytes], now: int, keep: int, reads: Reads
) -> Need | list[Op]:
    """`ZADD completed|dead now id...`, the metric's `count` + len(ids), and the trim.

    The rows' own fields (`state`, `finished_ms`, ...) are the caller's: they
    differ per verb. The metric's stored `count` is validated here so that its
    HINCRBY cannot fail in `apply`.
    """
    metric = _metric(keys, kind)
    count_read = (HGET, metric, b"count")
    if count_read not in reads:
        return need(count_read)
    incremented(reads[count_read], len(ids))
    added = [(now, job_id) for job_id in ids]
    trim = retention.trim_ops(keys, kind.decode(), keep, reads, added)
    if type(trim) is Need:
        return trim
    zadd: list = [b"ZADD", retention.set_key(keys, kind.decode())]
    for job_id in ids:
        zadd += [now, job_id]
    return [tuple(zadd), (b"HINCRBY", metric, b"count", len(ids)), *trim]  # type: ignore[misc]


def finish_reads(keys: QueueKeys, kind: bytes) -> tuple:
    """The reads `finish_ops` will ask for, for a verb to ask for ahead of their turn.

    With the metric and the set's size goes the oldest member: a queue at its
    keep_completed / keep_dead bound (the steady state) trims one row for each
    job it finishes, so that is the read the trim then needs.
    """
    name = kind.decode()
    return ((HGET, _metric(keys, kind), b"count"), retention.card_read(keys, name),
            retention.oldest_read(keys, name, 1))


def _metric(keys: QueueKeys, kind: bytes) -> bytes:
    return keys.metrics_completed if kind == COMPLETED else keys.metrics_failed


def dead_row_op(keys: QueueKeys, job_id: bytes, now: int, *fields: bytes) -> Op:
    """The row of a dead letter: `fields` (last_error, a counter) then state and time."""
    return (b"HSET", keys.job(job_id), *fields, STATE, DEAD, FINISHED_MS, b"%d" % now)
