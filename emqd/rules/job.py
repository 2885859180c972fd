"""What the job verbs share, written once: the holder's guard, where a job
(re-)enters, and the ops that take a job out of `active` or finish it.

Lanes (protocol section 8) change two answers here: `entry_key` (a lane job
enters its lane, not `pending`), and the bookkeeping that goes with entering
and leaving `active`: `enter_ops` and `leave_active_ops` note each move on
the plan's `lanes.Ledger`, and the verb adds `lanes.settle(ledger)` (the slot
back, the ring, the counters) to its plan. Every verb asks these helpers
instead of naming `pending` or `active` itself.

Like the planners, the helpers only read the store (through the `View`) and
return ops; a refusal raises before anything is written.
"""

from __future__ import annotations

from typing import Any, Final

from emqd import errors
from emqd.commit.plan import Op
from emqd.compat.numbers import parse_int
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.layout import QueueKeys
from emqd.rules import job_log, lanes, retention
from emqd.rules.backoff import Backoff, parse_backoff
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

PRIORITY_BAND: Final = 1 << 40  # score = priority * 2^40 + seq (protocol section 3)

ATTEMPTS: Final[bytes] = b"attempts"
FAILURES: Final[bytes] = b"failures"
STALLED: Final[bytes] = b"stalled"
STATE: Final[bytes] = b"state"
LEASE_EPOCH: Final[bytes] = b"lease_epoch"
LAST_ERROR: Final[bytes] = b"last_error"
CREATED_MS: Final[bytes] = b"created_ms"
CLAIMED_MS: Final[bytes] = b"claimed_ms"
# When the job last became claimable again (a promotion, requeue, stall recovery, revive,
# a parent's release): a claim's wait counts from it, else from `created_ms`.
READY_MS: Final[bytes] = b"ready_ms"
# The CLIENT ID of the named connection that claimed or last extended the lease (in the
# process `lease_epoch` names): the dashboard's Workers page, which jobs a worker holds.
HOLDER: Final[bytes] = b"holder"

FINISHED_MS: Final[bytes] = b"finished_ms"
PAYLOAD: Final[bytes] = b"payload"
# The trace context its producer gave (ADD ... TRACE), which CLAIM ... WITHTRACE hands to the
# worker: the server carries it, as bytes, and reads nothing in it (protocol section 22.4).
TRACE: Final[bytes] = b"trace"

PENDING: Final[bytes] = b"pending"
ACTIVE: Final[bytes] = b"active"
SCHEDULED: Final[bytes] = b"scheduled"
DEAD: Final[bytes] = b"dead"
COMPLETED: Final[bytes] = b"completed"
WAITING: Final[bytes] = b"waiting"  # a flow's parent, until its children are done (rules/flows.py)
CANCELLED: Final[bytes] = b"cancelled"  # ended by EMQ.CANCEL (verbs/cancel.py)
CANCEL_REASON: Final[bytes] = b"cancel_reason"  # its REASON, told to the job's holder


def field(row: Hash, name: bytes) -> bytes | None:
    """One field of a row (the store's compact rows are read through here)."""
    return hashes.get(row, name)


# --- the holder's guard (COMPLETE, FAIL, REQUEUE, EXTEND) -----------------------------
def held(view: View, keys: QueueKeys, job_id: bytes, token: bytes) -> Hash:
    """The row of the job `token` holds, or raises EMQSTALE (the seed's decide_fail order).

    No `attempts` (no row, or never claimed) -> `job gone`; `attempts` differs
    from the token, as bytes -> `token mismatch`; the token matches but the job
    is not held (state not `active`, or not in `active`) -> `job not active`.
    A row created under an explicit id holds `attempts` before its first claim
    (the queue's token floor, rules/tokens.py): never claimed (no `claimed_ms`),
    it is `job gone` to every token, as a row without `attempts` is; checked
    only on the way to a refusal, so an accepted verb reads nothing more.
    A row key holding a sorted set, or `active` holding a hash, answers
    WRONGTYPE first: both are read before anything is judged.
    """
    row = view.hash(keys.job(job_id))
    active = view.zset(keys.active)
    attempts = None if row is None else hashes.get(row, ATTEMPTS)
    if row is None or attempts is None:
        raise errors.STALE_GONE()
    if attempts != token:
        raise _never_claimed(row) or errors.STALE_TOKEN()
    if hashes.get(row, STATE) != ACTIVE or active is None or job_id not in active:
        raise _never_claimed(row) or _not_active(row)
    return row


def _never_claimed(row: Hash) -> ReplyError | None:
    """`job gone` for a row that holds a floor as `attempts` but was never claimed."""
    return None if hashes.has(row, CLAIMED_MS) else errors.STALE_GONE()


def _not_active(row: Hash) -> ReplyError:
    """The holder of a job no longer active: EMQCANCELLED (with the canceller's reason) when
    EMQ.CANCEL ended it, so that the worker stops the handler; else `job not active`."""
    if hashes.get(row, STATE) == CANCELLED:
        return errors.cancelled(hashes.get(row, CANCEL_REASON))
    return errors.STALE_NOT_ACTIVE()


def next_seq(stored: bytes | None, config: Config) -> int:
    """The queue's next sequence number: `meta.seq + 1`, or the first of this process.

    Without a log (--appendonly no) every queue starts empty at each start, so a
    worker of the previous process could present an (id, token) that names a
    new job: ids then start after `config.id_base`, the start time (PROTOCOL.md
    6.1). A corrupt `meta.seq` refuses with HINCRBY's text.
    """
    return incremented(stored, 1) if stored is not None else (config.id_base or 0) + 1


# --- the row's own settings, validated (rule 1: a plan cannot fail halfway) ----------
def priority(row: Hash) -> int:
    raw = hashes.get(row, b"priority")
    if raw is None:
        return 0
    value = parse_int(raw)
    if value is None or not -1000 <= value <= 1000:
        raise errors.corrupt_job_field(b"priority")
    return value


def max_attempts(row: Hash) -> int | None:
    raw = hashes.get(row, b"max_attempts")
    if raw is None:
        return None
    value = parse_int(raw)
    if value is None or value <= 0:
        raise errors.corrupt_job_field(b"max_attempts")
    return value


def backoff(row: Hash) -> Backoff | None:
    raw = hashes.get(row, b"backoff")
    if raw is None:
        return None
    rule = parse_backoff(raw)
    if rule is None:
        raise errors.corrupt_job_field(b"backoff")
    return rule


# --- where a job enters ----------------------------------------------------------------
def entry_key(keys: QueueKeys, row: Hash) -> bytes:
    """The set a waiting job sits in: `pending`, or a lane job's lane."""
    return lanes.waiting_key(keys, lanes.group_of(row))


def check_entry(view: View, keys: QueueKeys, row: Hash) -> None:
    """Make sure the entry set is a sorted set (WRONGTYPE now) before a plan ZADDs to it."""
    view.check_zset(entry_key(keys, row))


def first_entry_score(row: Hash, seq: int) -> int:
    """ADD, or PROMOTE of a job never claimed: the back of its priority band."""
    return priority(row) * PRIORITY_BAND + seq


def reentry_score(row: Hash) -> int:
    """REQUEUE, stall recovery, PROMOTE of a job claimed before, REVIVE: the front."""
    return priority(row) * PRIORITY_BAND


def enter_ops(keys: QueueKeys, job_id: bytes, row: Hash, score: int, *fields: bytes,
              ledger: lanes.Ledger, ready_ms: int) -> list[Op]:
    """`state pending` (with `fields` written first, and `ready_ms`: when the job became
    claimable again, from which its next claim's wait is counted) and the ZADD to its
    entry set.

    The move is noted on `ledger`; the verb's plan must include `lanes.settle`.
    """
    ledger.enter(lanes.group_of(row))
    return [
        (b"HSET", keys.job(job_id), *fields, READY_MS, b"%d" % ready_ms, STATE, PENDING),
        (b"ZADD", entry_key(keys, row), score, job_id),
    ]


def leave_active_ops(keys: QueueKeys, job_id: bytes, row: Hash | None,
                     ledger: lanes.Ledger) -> list[Op]:
    """A job leaves `active`; a lane job's slot given back is noted on `ledger`."""
    ledger.leave_active(lanes.group_of(row))
    return [(b"ZREM", keys.active, job_id)]


# --- finishing: the set entry, the metric, the retention trim --------------------------
def finish_ops(view: View, keys: QueueKeys, kind: bytes, ids: list[bytes], now: int,
               keep: int, keep_ms: int = 0) -> list[Op]:
    """`ZADD completed|dead|cancelled now id...`, the kind's counter + len(ids), and the trim.

    The rows' own fields (`state`, `finished_ms`, ...) are the caller's: they
    differ per verb. The counter is written as its new value (HSET, as count_op
    writes counters), so a plan counts each (queue, kind) in one call: the verbs
    gather their deaths (ties.take_deaths) before calling it.
    """
    metric, name = metric_of(keys, kind)
    count = incremented(view.hget(metric, name), len(ids))
    added = [(now, job_id) for job_id in ids]
    trim = retention.trim_ops(view, keys, kind.decode(), keep, added, keep_ms, now)
    zadd: list[Any] = [b"ZADD", retention.set_key(keys, kind.decode())]
    for job_id in ids:
        zadd += [now, job_id]
    return [tuple(zadd), (b"HSET", metric, name, b"%d" % count), *trim]


def count_op(view: View, keys: QueueKeys, *names: bytes, by: int = 1) -> Op:
    """`HSET metrics name n ...`: each counter of `p.."metrics"` `by` higher, as values.

    The log holds effects, so the new values are written; a stored value that
    HINCRBY would refuse refuses the verb, as every counter does.
    """
    row = view.hash(keys.metrics)
    op: list[bytes] = [b"HSET", keys.metrics]
    for name in names:  # appended, not spread from a list of pairs: ~900 instructions less
        op.append(name)
        op.append(b"%d" % incremented(None if row is None else hashes.get(row, name), by))
    return tuple(op)


def set_of(keys: QueueKeys, row: Hash) -> bytes | None:
    """The set a job that is not active sits in, by its state (None for an unknown state)."""
    state = hashes.get(row, STATE)
    if state == PENDING:
        return entry_key(keys, row)
    if state == SCHEDULED:
        return keys.scheduled
    if state == DEAD:
        return keys.dead
    if state == COMPLETED:
        return keys.completed
    if state == CANCELLED:
        return keys.cancelled
    return keys.waiting if state == WAITING else None


def removal_ops(view: View, keys: QueueKeys, job_id: bytes, row: Hash,
                ledger: lanes.Ledger) -> list[Op]:
    """Delete a job that is not active: its row (with its log, job_log.py) and the entry of
    the set its state names (`leave_set_ops`)."""
    return [job_log.del_op(view, keys, [job_id]), *leave_set_ops(view, keys, job_id, row, ledger)]


def leave_set_ops(view: View, keys: QueueKeys, job_id: bytes, row: Hash,
                  ledger: lanes.Ledger) -> list[Op]:
    """A job that is not active leaves the set its state names (none for an unknown state).

    A waiting lane job leaves with its lane bookkeeping (noted on `ledger`).
    """
    zkey = set_of(keys, row)
    if zkey is None:
        return []
    zset = view.zset(zkey)
    if hashes.get(row, STATE) == PENDING and zset is not None and job_id in zset:
        ledger.leave_waiting(lanes.group_of(row))
    return [(b"ZREM", zkey, job_id)]


def metric_of(keys: QueueKeys, kind: bytes) -> tuple[bytes, bytes]:
    """Where a kind of finished job is counted: (hash, field)."""
    if kind == COMPLETED:
        return keys.metrics_completed, b"count"
    if kind == CANCELLED:
        return keys.metrics, CANCELLED
    return keys.metrics_failed, b"count"


def dead_row_op(keys: QueueKeys, job_id: bytes, now: int, fields: tuple[bytes, ...]) -> Op:
    """The row of a dead letter: `fields` (last_error, a counter) then state and time.

    `fields` is a tuple, not `*fields`: compiled, a call that spreads a tuple into a
    star parameter is a generic call (~2,400 instructions, a FAIL's dead letter)."""
    return ended_row_op(keys, job_id, now, DEAD, fields)


def ended_row_op(keys: QueueKeys, job_id: bytes, now: int, state: bytes,
                 fields: tuple[bytes, ...]) -> Op:
    """The row of a job that ended (dead, cancelled): `fields`, then state and time."""
    return (b"HSET", keys.job(job_id), *fields, STATE, state, FINISHED_MS, b"%d" % now)
