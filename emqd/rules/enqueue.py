"""Creating jobs, written once: ADD (beyond its fast path), FLOW and the schedules' jobs.

One plan may create several jobs, in several queues (a flow's children may
live anywhere). `Enqueue` keeps, per queue touched, what the plan has done to
it so far: the last sequence number used (`meta.seq`), the jobs added
(`meta.added`), the ids taken, the lanes' ledger, and whether the queue is new
to `emq:queues`; `ops()` then gives the meta writes, the lane bookkeeping and
the new queues, after every job's row and set entry, in the order ADD has
always written them.

Where a new job goes: `pending` (or its lane) when due now; `scheduled` at a
due time in the future; `waiting` for a flow's parent (rules/flows.py), which
enters pending only when its children are done.

Like every planner helper it only reads (through the `View`), validates
every stored value its ops depend on (`meta.seq`, `meta.added`, the type of
each set it adds to) and returns ops; a refusal raises before anything is
written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from emqd.commit import events
from emqd.commit.events import Event
from emqd.commit.plan import SCHEDULED, Due, Op
from emqd.compat.numbers import ms_text
from emqd.config import Config
from emqd.layout import QUEUES, QueueKeys
from emqd.rules import job, lanes, tokens
from emqd.rules.job import ATTEMPTS, PRIORITY_BAND
from emqd.store import hash as hashes
from emqd.store.hash import incremented
from emqd.store.keyspace import View

# meta fields (verbs/add.py reads SEQ and ADDED at import time)
SEQ: Final[bytes] = b"seq"
ADDED: Final[bytes] = b"added"  # meta field: jobs added, ever (emqd_jobs_added_total)
WAITING: Final = b"waiting"


def ahead_of(job_id: bytes, seq: int) -> int:
    """The id as a sequence number when the generator would make it later (a canonical
    decimal from `seq` up to the score's band, 2^40), else 0: taking such an id moves
    `meta.seq` to it, so that the generator never makes it, even once its row is gone
    (a worker may still hold one of its tokens: rules/tokens.py)."""
    if not job_id.isdigit() or job_id[0] == 48 or len(job_id) > 13:  # b"0"; 2^40: 13 digits
        return 0
    number = int(job_id)
    return number if seq <= number < PRIORITY_BAND else 0


@dataclass(slots=True)
class NewJob:
    """What a new job's row holds: ADD's options, and the fields a feature adds."""

    payload: bytes
    priority: int | None = None
    max_attempts: int | None = None
    backoff: bytes | None = None
    group: bytes | None = None
    fields: list[bytes] = field(default_factory=list)  # name, value, ... (parent, repeat, ...)
    trace: bytes | None = None  # TRACE: the producer's trace context (protocol section 22.4)

    def row_fields(self) -> list[bytes]:
        """The option fields, only those given (ADD's rule), then the feature's own."""
        out: list[bytes] = []
        if self.priority is not None:
            out += [b"priority", b"%d" % self.priority]
        if self.max_attempts is not None:
            out += [b"max_attempts", b"%d" % self.max_attempts]
        if self.backoff is not None:
            out += [b"backoff", self.backoff]
        if self.group is not None:
            out += [lanes.GROUP, self.group]
        if self.trace is not None:
            out += [job.TRACE, self.trace]
        return out + self.fields


class _Queue:
    """One queue's share of the plan: sequence, count, ids taken, lanes."""

    __slots__ = ("keys", "meta", "seq", "added", "new", "taken", "ledger", "first_attempts")

    def __init__(self, view: View, keys: QueueKeys, config: Config, now_ms: int) -> None:
        meta = view.hash(keys.meta)
        queues = view.zset(QUEUES)
        self.keys = keys
        self.meta = meta
        self.first_attempts: int | None = None  # an explicit id's row's, once one is added
        # the last number used: `meta.seq`, or where this process starts a queue's ids
        self.seq = job.next_seq(None if meta is None else hashes.get(meta, SEQ), config) - 1
        self.added = incremented(None if meta is None else hashes.get(meta, ADDED), 0)
        self.new = queues is None or keys.queue not in queues
        self.taken: set[bytes] = set()
        self.ledger = lanes.Ledger(view, keys, config, now_ms)


class Enqueue:
    """The jobs one plan creates; `add` each, then `ops()` once."""

    def __init__(self, view: View, config: Config, now_ms: int) -> None:
        self.view = view
        self.config = config
        self.now_ms = now_ms
        self.queues: dict[bytes, _Queue] = {}
        self.rows: list[Op] = []  # each job's row and set entry, in order
        self.events: list[Event] = []
        self.due: list[Due] = []

    def queue(self, keys: QueueKeys) -> _Queue:
        state = self.queues.get(keys.queue)
        if state is None:
            state = self.queues[keys.queue] = _Queue(self.view, keys, self.config, self.now_ms)
        return state

    def exists(self, keys: QueueKeys, job_id: bytes) -> bool:
        """A row under that id, in the store or made by this plan."""
        state = self.queues.get(keys.queue)
        if state is not None and job_id in state.taken:
            return True
        return self.view.type_name(keys.job(job_id)) != "none"

    def reserve(self, keys: QueueKeys, job_id: bytes) -> None:
        """An explicit id this plan will add later: no id given before it may take it."""
        self.queue(keys).taken.add(job_id)

    def add(self, keys: QueueKeys, job: NewJob, job_id: bytes | None = None,
            due: int | None = None, waiting: bool = False) -> bytes:
        """A new job (its id: `job_id`, else the next free sequence number); its ops noted.

        `due`: a time in the future (the job is scheduled); `waiting`: a flow's
        parent. The caller has made sure an explicit `job_id` is free.
        """
        state = self.queue(keys)
        seq = incremented(b"%d" % state.seq, 1)
        fields = job.row_fields()
        if job_id is None:
            job_id = b"%d" % seq
            while self.exists(keys, job_id):  # a client made that row
                seq = incremented(job_id, 1)
                job_id = b"%d" % seq
        else:  # its tokens start above every token the queue issued (rules/tokens.py)
            if state.first_attempts is None:
                state.first_attempts = tokens.first_attempts(state.meta, self.config)
            if state.first_attempts:
                fields.append(ATTEMPTS)
                fields.append(b"%d" % state.first_attempts)
            seq = max(seq, ahead_of(job_id, seq))
        state.seq = seq
        state.added = incremented(b"%d" % state.added, 1)
        state.taken.add(job_id)
        now = self.now_ms
        if waiting:
            where, name, score = keys.waiting, WAITING, now
        elif due is not None:
            where, name, score = keys.scheduled, b"scheduled", due
        else:
            where = lanes.waiting_key(keys, job.group)
            name, score = b"pending", (job.priority or 0) * PRIORITY_BAND + seq
            state.ledger.enter(job.group)
        self.view.check_zset(where)  # its type, before the plan ZADDs to it
        self.rows += [
            (b"HSET", keys.job(job_id), b"state", name, b"payload", job.payload,
             b"created_ms", ms_text(now), *fields),
            (b"ZADD", where, score, job_id),
        ]
        extra: dict[str, Any] | None = None if due is None else {"due_ms": due}
        self.events.append((events.ADDED, keys.queue, job_id, now, extra))
        if due is not None:
            self.due.append((SCHEDULED, keys.queue, due))
        return job_id

    def ops(self) -> list[Op]:
        """The rows, then per queue `meta.seq` / `meta.added` and the lanes, then new queues."""
        ops = list(self.rows)
        for state in self.queues.values():
            if not state.taken:
                continue
            ops.append((b"HSET", state.keys.meta, SEQ, b"%d" % state.seq,
                        ADDED, b"%d" % state.added))
            ops += lanes.settle(state.ledger)
        for state in self.queues.values():
            if state.taken and state.new:
                ops.append((b"ZADD", QUEUES, self.now_ms, state.keys.queue))
        return ops
