"""The debounce (`EMQ.ADD ... UNIQUE key [REPLACE] [EXTEND]`): a later add changes the job that
waits under its key, instead of being turned away as UNIQUE turns it away (BullMQ's
deduplication with `replace` and `extend`).

Only a holder that is still waiting can change: pending (or in its lane) or
scheduled, and in the set its state names. One that runs, has finished, or is
a flow's parent waiting for its children (a UNIQUE job never is) keeps the key
as UNIQUE says, and the add answers `exists` with nothing written.

- REPLACE: the job becomes what the add describes: its `payload`, and its
  options (`priority`, `max_attempts`, `backoff`, `group`, `trace`) as given, the ones
  not given deleted (its `trace` too: the context of the add that made it). Its
  place is kept: a pending job keeps its sequence number
  (its score's low part) under its new priority, in its new lane if the group
  changed; a scheduled one keeps its due time.
- EXTEND: its due time restarts as the add's would be (now + DELAY, or AT; due
  now without either, so a scheduled job enters pending, as promotion enters
  it), and a TTL hold (`unique_until`) restarts at now + the add's TTL when the
  add has one.

Both, together: the job runs DELAY ms after the last add, with the last
payload (BullMQ's debounce mode). Nothing else changes: its id, `created_ms`,
its counters and token, `meta.added` (no job is added).

Like every planner helper it only reads and returns ops; every stored value
the ops depend on (the holder's `priority`, `meta.seq`, the lane counters, the
types of the sets) is validated first, so a refusal writes nothing.
"""

from __future__ import annotations

from typing import Final

from emqd.commit import events
from emqd.commit.events import Event
from emqd.commit.plan import SCHEDULED, Due, Op
from emqd.config import Config
from emqd.layout import QueueKeys
from emqd.rules import enqueue, job, lanes, unique
from emqd.store import hash as hashes
from emqd.store.hash import Hash
from emqd.store.keyspace import View

REPLACED: Final = b"replaced"  # ADD's verdict words: REPLACE given (with EXTEND or not)
EXTENDED: Final = b"extended"  # ... EXTEND alone
OPTION_FIELDS: Final = (b"priority", b"max_attempts", b"backoff", lanes.GROUP, job.TRACE)


class Change:
    """What the add asks of the waiting holder: `new` (REPLACE: its payload and options, as
    enqueue.NewJob holds them) or None; `extend` with `due` (its new due time, None: now)
    and `until` (its TTL hold's new end, None: unchanged)."""

    __slots__ = ("new", "extend", "due", "until")

    def __init__(self, new: enqueue.NewJob | None, extend: bool, due: int | None,
                 until: int | None) -> None:
        self.new = new
        self.extend = extend
        self.due = due
        self.until = until


class Debounced:
    """The plan's share: its ops, its event, when housekeeping has work because of it."""

    __slots__ = ("ops", "events", "due")

    def __init__(self, ops: list[Op], happened: list[Event], due: list[Due]) -> None:
        self.ops = ops
        self.events = happened
        self.due = due


def waiting(view: View, keys: QueueKeys, job_id: bytes) -> Hash | None:
    """The holder's row when it is still waiting (pending or scheduled, in that set)."""
    row = view.hash(keys.job(job_id))
    if row is None:
        return None
    state = hashes.get(row, job.STATE)
    if state != job.PENDING and state != job.SCHEDULED:
        return None
    where = job.set_of(keys, row)
    zset = None if where is None else view.zset(where)
    return row if zset is not None and job_id in zset else None


def change(view: View, keys: QueueKeys, config: Config, now_ms: int, job_id: bytes, row: Hash,
           asked: Change) -> Debounced:
    """The ops that make the waiting job `job_id` (its row `row`, from `waiting`) what
    `asked` says."""
    row_key = keys.job(job_id)
    new = asked.new
    old_group = lanes.group_of(row)
    old_priority = job.priority(row)  # validated: a corrupt one refuses the add
    group = old_group if new is None else new.group
    priority = old_priority if new is None else (new.priority or 0)
    was_scheduled = hashes.get(row, job.STATE) == job.SCHEDULED
    where = job.set_of(keys, row)
    assert where is not None  # `waiting` found it in that set
    zset = view.zset(where)
    assert zset is not None
    score = zset.score(job_id)
    assert score is not None
    due = asked.due if asked.extend else (int(score) if was_scheduled else None)
    ledger = lanes.Ledger(view, keys, config, now_ms)
    fields: list[bytes] = []
    ops: list[Op] = []
    dues: list[Due] = []
    if new is not None:
        given = new.row_fields()
        fields += [job.PAYLOAD, new.payload, *given]
        gone = [name for name in OPTION_FIELDS if hashes.has(row, name) and name not in given[::2]]
        if gone:
            ops.append((b"HDEL", row_key, *gone))
    if asked.until is not None and hashes.has(row, unique.UNTIL):
        fields += [unique.UNTIL, b"%d" % asked.until]
        key = hashes.get(row, unique.UNIQUE)
        assert key is not None  # the holder of a key names it
        ops.append((b"ZADD", keys.unique_ttl, asked.until, key))
    if not was_scheduled:
        ledger.leave_waiting(old_group)
    if due is not None:  # it waits in `scheduled`
        view.check_zset(keys.scheduled)
        if not was_scheduled:
            ops.append((b"ZREM", where, job_id))
            fields += [job.STATE, job.SCHEDULED]
        if not was_scheduled or due != score:
            ops.append((b"ZADD", keys.scheduled, due, job_id))
            dues.append((SCHEDULED, keys.queue, due))
    else:  # pending, in its (new) lane
        entry = lanes.waiting_key(keys, group)
        view.check_zset(entry)
        if was_scheduled:  # due now: it enters as promotion enters it
            ops.append((b"ZREM", keys.scheduled, job_id))
            fields += [job.READY_MS, b"%d" % now_ms, job.STATE, job.PENDING]
            if hashes.has(row, job.CLAIMED_MS):
                place = priority * job.PRIORITY_BAND
            else:
                seq = job.next_seq(view.hget(keys.meta, enqueue.SEQ), config)
                place = priority * job.PRIORITY_BAND + seq
                ops.append((b"HSET", keys.meta, enqueue.SEQ, b"%d" % seq))
        else:  # it keeps its place: its sequence number, under its new priority
            place = int(score) - old_priority * job.PRIORITY_BAND + priority * job.PRIORITY_BAND
            if entry != where:
                ops.append((b"ZREM", where, job_id))
        ledger.enter(group)
        if entry != where or place != score:
            ops.append((b"ZADD", entry, place, job_id))
    if fields:
        ops.insert(0, (b"HSET", row_key, *fields))
    ops += lanes.settle(ledger)
    extra = None if due is None else {"due_ms": due}
    return Debounced(ops, [(events.DEBOUNCED, keys.queue, job_id, now_ms, extra)], dues)
