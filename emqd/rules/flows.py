"""Flows (EMQ.FLOW): a parent runs once its children are done.

A parent waits in its queue's `waiting` set (`state waiting`, score the time
it began to wait) until every child is settled; then it enters pending, in
the same plan as the child's transition that settled the last one. Children
may live in any queue, and a child may have children of its own (a tree:
each node names an earlier one as its parent, so a cycle cannot be built).

What the rows hold:

- a child: `parent`, its parent's row key (`emq:{PQUEUE}:job:PID`);
- a parent: `children` (how many it was given), and while it has not run
  yet `children_left` (children not settled) and `children_dead` (children
  dead that count against it, absent when none), `on_child_fail` when given
  (`fail`, the default, `ignore` or `remove`), and while it is dead of a
  child, `failed_child` (that child's row key; `last_error` names it too).

Its record: `p.."children:"..PID` (zset: each child's row key, scored by its
place in the flow) and `p.."results:"..PID` (hash: child row key -> the
RESULT it completed with, written by the child's COMPLETE, so a result
outlives the retention of the child's row). Both live as long as the
parent's row: they are deleted with it (REMOVE, retention), never when it
completes, so a finished parent still lists its children.

Settling, per `on_child_fail`: a child that completes is settled. A child
that dies, or is cancelled (EMQ.CANCEL: it will not run again either), is
settled under `ignore`; under `fail` and `remove` it counts
against its parent (`children_dead` + 1), and the first such death kills the
parent (state dead, `last_error` `child died: <child key>`); `remove` also
deletes the parent's other children that are not running (pending,
scheduled or waiting, with their own subtrees). A dead child that is revived
is no longer dead (`children_dead` - 1, or `children_left` + 1 under
`ignore`): a parent with no dead child left is waiting again (or pending,
when nothing is left). A child removed (EMQ.REMOVE) is settled. So a
parent's status is a function of its two counters:

    children_dead > 0  -> dead
    children_left > 0  -> waiting
    otherwise          -> pending (promoted; both counters deleted)

and a parent that dies or comes back is itself a child to its own parent.

How a verb uses this module: it builds one `Flows` for its plan, with the
lane ledgers it already has (one per queue: two ledgers on one queue would
each write its own totals) and the jobs it moves itself (`busy`: never
removed by a `remove` policy under the verb's feet); it reports what its
plan does to a child (`completed`, `died`, `revived`, `removed`); then
`resolve()` works out every touched parent, passing deaths and returns up
the tree; `take_deaths(queue)` hands the verb the parents that die in its
own queue, so that its one `job.finish_ops` counts and trims them with its
own; `ops()` gives the rest, and the verb settles its lanes last. Every
stored value the ops depend on (the counters, `on_child_fail`, `meta.seq`)
is validated first, so applying cannot fail halfway.
"""

from __future__ import annotations

from typing import Final

from emqd import errors
from emqd.commit import events
from emqd.commit.events import Event
from emqd.commit.plan import AGING, Due, Op
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys, split_job_key
from emqd.rules import args as parse_args
from emqd.rules import job, lanes
from emqd.rules import settings as queue_settings
from emqd.rules.retention import CHILDREN as CHILDREN
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

PARENT: Final[bytes] = b"parent"  # typed: ties.py reads it at import time
LEFT: Final = b"children_left"
DEAD_CHILDREN: Final = b"children_dead"
POLICY: Final = b"on_child_fail"
FAILED_CHILD: Final = b"failed_child"
FAIL: Final = b"fail"
IGNORE: Final = b"ignore"
REMOVE: Final = b"remove"
POLICIES: Final = (FAIL, IGNORE, REMOVE)


def child_died_error(child_key: bytes, how: bytes = b"died") -> bytes:
    """The `last_error` of a parent killed by a child (`how`: died, or cancelled)."""
    return b"child " + how + b": " + child_key


def status(left: int, dead: int) -> bytes:
    """A parent's state as its counters make it."""
    if dead > 0:
        return job.DEAD
    return job.WAITING if left > 0 else job.PENDING


def record_ops(keys: QueueKeys, job_id: bytes, row: Hash) -> list[Op]:
    """Delete a parent's record (its children and their results), when the row is a parent's."""
    if not hashes.has(row, CHILDREN):
        return []
    return [(b"DEL", keys.children(job_id), keys.results(job_id))]


class _Parent:
    """One parent a plan touches: its counters as the plan changes them."""

    __slots__ = ("key", "keys", "id", "row", "policy", "left", "dead", "was", "now", "results",
                 "cause", "how")

    def __init__(self, key: bytes, keys: QueueKeys, job_id: bytes, row: Hash) -> None:
        self.key = key
        self.keys = keys
        self.id = job_id
        self.row = row
        policy = hashes.get(row, POLICY) or FAIL
        if policy not in POLICIES:
            raise errors.corrupt_job_field(POLICY)
        self.policy = policy
        self.left = incremented(hashes.get(row, LEFT), 0)
        self.dead = incremented(hashes.get(row, DEAD_CHILDREN), 0)
        self.was = self.now = hashes.get(row, job.STATE)
        self.results: list[bytes] = []  # child key, result, ...
        self.cause: bytes | None = None  # the child whose death kills it in this plan
        self.how = b"died"  # ... or whose cancel does (`cancelled`)


class Flows:
    """What one plan does to flows: the parents it touches, resolved, then as ops."""

    def __init__(self, view: View, config: Config, now_ms: int,
                 ledgers: dict[bytes, lanes.Ledger] | None = None,
                 busy: set[bytes] | None = None) -> None:
        self.view = view
        self.config = config
        self.now_ms = now_ms
        self.ledgers = {} if ledgers is None else ledgers
        self.own = set(self.ledgers)  # the verb settles these itself
        self.busy = set() if busy is None else busy
        self.parents: dict[bytes, _Parent | None] = {}
        self.removed: set[bytes] = set()
        self.removals: list[Op] = []
        self.deaths: dict[bytes, list[bytes]] = {}
        self.parent_ops: list[Op] = []
        self.events: list[Event] = []
        self.due: list[Due] = []

    def ledger(self, keys: QueueKeys) -> lanes.Ledger:
        ledger = self.ledgers.get(keys.queue)
        if ledger is None:
            ledger = lanes.Ledger(self.view, keys, self.config, self.now_ms)
            self.ledgers[keys.queue] = ledger
        return ledger

    def _parent(self, row: Hash) -> _Parent | None:
        """The waiting (or dead of a child) parent a child row names, or None."""
        key = hashes.get(row, PARENT)
        if key is None:
            return None
        if key in self.parents:
            return self.parents[key]
        found = None
        where = split_job_key(key)
        if where is not None and parse_args.is_queue_name(where[0]):  # else a client's write
            keys = queue_keys(where[0])
            prow = self.view.hash(key)
            if (prow is not None and hashes.has(prow, LEFT)
                    and hashes.get(prow, job.STATE) in (job.WAITING, job.DEAD)):
                found = _Parent(key, keys, where[1], prow)
        self.parents[key] = found
        return found

    # --- what the verb's plan does to a child ----------------------------------------
    def completed(self, child_key: bytes, row: Hash, result: bytes | None) -> None:
        parent = self._parent(row)
        if parent is not None:
            parent.left -= 1
            parent.results += [child_key, result or b""]

    def died(self, child_key: bytes, row: Hash, how: bytes = b"died") -> None:
        """A child dies, or is cancelled (`how`): the same to its parent but for its words."""
        parent = self._parent(row)
        if parent is None:
            return
        if parent.policy == IGNORE:
            parent.left -= 1
        else:
            parent.dead += 1
            if parent.cause is None:
                parent.cause = child_key
                parent.how = how

    def revived(self, child_key: bytes, row: Hash) -> None:
        parent = self._parent(row)
        if parent is None:
            return
        if parent.policy == IGNORE:
            parent.left += 1
        else:
            parent.dead -= 1

    def removed_child(self, child_key: bytes, row: Hash) -> None:
        """A child deleted (EMQ.REMOVE, or a `remove` policy): it is settled."""
        parent = self._parent(row)
        if parent is None:
            return
        state = hashes.get(row, job.STATE)
        if state == job.COMPLETED:
            return
        if state == job.DEAD or state == job.CANCELLED:
            if parent.policy == IGNORE:
                return  # settled when it died
            parent.dead -= 1
        parent.left -= 1

    # --- working it out ----------------------------------------------------------------
    def resolve(self) -> None:
        """Each touched parent's new status (a parent that dies or comes back tells its own),
        then the parents' ops; their deaths wait in `deaths` (see `take_deaths`)."""
        changed = True
        while changed:
            changed = False
            for parent in list(self.parents.values()):
                if parent is None or parent.key in self.removed:
                    continue
                target = status(parent.left, parent.dead)
                if target == parent.now:
                    continue
                was_dead = parent.now == job.DEAD
                parent.now = target
                changed = True
                if target == job.DEAD:
                    self.died(parent.key, parent.row)
                    if parent.policy == REMOVE:
                        self._remove_rest(parent)
                elif was_dead:
                    self.revived(parent.key, parent.row)
        self.parent_ops = self._plan_parents()

    def _remove_rest(self, parent: _Parent) -> None:
        """The `remove` policy: the parent's children that are not running are deleted."""
        for child_key in self._children(parent.keys, parent.id):
            row = self._removable(child_key)
            if row is not None:
                self.removed_child(child_key, row)
                self._delete(child_key, row)

    def _children(self, keys: QueueKeys, job_id: bytes) -> list[bytes]:
        record = self.view.zset(keys.children(job_id))
        return [] if record is None else list(record.members())

    def _removable(self, child_key: bytes) -> Hash | None:
        """The row of a child a `remove` policy deletes: not running, not the verb's own."""
        if child_key in self.busy or child_key in self.removed:
            return None
        row = self.view.hash(child_key)
        tracked = self.parents.get(child_key)  # a parent this plan changes: its state now
        state = tracked.now if tracked is not None else None if row is None else hashes.get(
            row, job.STATE)
        if row is None or state not in (job.PENDING, job.SCHEDULED, job.WAITING):
            return None
        return row

    def _delete(self, child_key: bytes, row: Hash) -> None:
        """Delete a job with its record and, for a parent, its subtree (what is not running)."""
        where = split_job_key(child_key)
        if where is None or not parse_args.is_queue_name(where[0]):
            return
        keys = queue_keys(where[0])
        job_id = where[1]
        self.removed.add(child_key)
        self.removals += job.removal_ops(self.view, keys, job_id, row, self.ledger(keys))
        self.removals += record_ops(keys, job_id, row)
        self.events.append((events.REMOVED, keys.queue, job_id, self.now_ms, None))
        if hashes.has(row, CHILDREN):
            for grandchild in self._children(keys, job_id):
                below = self._removable(grandchild)
                if below is not None:
                    self._delete(grandchild, below)

    def take_deaths(self, queue: bytes) -> list[bytes]:
        """The parents of `queue` that die in this plan, for the verb's own `finish_ops`."""
        return self.deaths.pop(queue, [])

    # --- the plan ------------------------------------------------------------------------
    def _plan_parents(self) -> list[Op]:
        ops: list[Op] = []
        seqs: dict[bytes, tuple[QueueKeys, int]] = {}
        for parent in self.parents.values():
            if parent is None or parent.key in self.removed:
                continue
            ops += self._parent_ops(parent, seqs)
        for keys, seq in seqs.values():
            ops.append((b"HSET", keys.meta, b"seq", b"%d" % seq))
        return ops

    def ops(self) -> list[Op]:
        """Everything after the verb's own ops: removals, parents, the deaths of other
        queues (counted and trimmed), and the lanes of the queues the verb does not settle."""
        ops = [*self.removals, *self.parent_ops]
        for queue, ids in self.deaths.items():
            keys = queue_keys(queue)
            settings = queue_settings.of_queue(self.view, keys, self.config)
            ops += job.finish_ops(self.view, keys, job.DEAD, ids, self.now_ms, settings.keep_dead,
                                  settings.keep_dead_ms)
            if settings.keep_dead_ms:
                self.due.append((AGING, queue, self.now_ms + settings.keep_dead_ms))
        self.deaths.clear()
        for queue, ledger in self.ledgers.items():
            if queue not in self.own:
                ops += lanes.settle(ledger)
        return ops

    def _parent_ops(self, parent: _Parent, seqs: dict[bytes, tuple[QueueKeys, int]]) -> list[Op]:
        keys, job_id, now = parent.keys, parent.id, self.now_ms
        row_key = keys.job(job_id)
        left, dead = max(parent.left, 0), max(parent.dead, 0)
        ops: list[Op] = []
        if parent.results:
            ops.append((b"HSET", keys.results(job_id), *parent.results))
        if parent.now == parent.was:
            fields = [LEFT, b"%d" % left]
            if dead:
                fields += [DEAD_CHILDREN, b"%d" % dead]
            ops.append((b"HSET", row_key, *fields))
            if not dead and hashes.has(parent.row, DEAD_CHILDREN):
                ops.append((b"HDEL", row_key, DEAD_CHILDREN))
            return ops
        source = keys.dead if parent.was == job.DEAD else keys.waiting
        view = self.view
        view.check_zset(source)
        ops.append((b"ZREM", source, job_id))
        if parent.was == job.DEAD:
            ops.append(job.count_op(view, keys, b"revived"))
            self.events.append((events.REVIVED, keys.queue, job_id, now, None))
        if parent.now == job.DEAD:
            error = child_died_error(parent.cause or b"", parent.how)
            ops.append(job.dead_row_op(keys, job_id, now, (
                job.LAST_ERROR, error, FAILED_CHILD, parent.cause or b"", LEFT, b"%d" % left,
                DEAD_CHILDREN, b"%d" % dead)))
            self.deaths.setdefault(keys.queue, []).append(job_id)
            self.events.append((events.DEAD, keys.queue, job_id, now, {"error": error}))
            return ops
        gone = [name for name in (DEAD_CHILDREN, FAILED_CHILD) if hashes.has(parent.row, name)]
        if parent.now == job.WAITING:
            view.check_zset(keys.waiting)
            ops.append((b"HSET", row_key, job.STATE, job.WAITING, LEFT, b"%d" % left))
            ops.append((b"ZADD", keys.waiting, now, job_id))
        else:  # promoted: it enters pending for the first time
            gone.append(LEFT)
            job.check_entry(view, keys, parent.row)
            known = seqs.get(keys.queue)
            stored = view.hget(keys.meta, b"seq") if known is None else b"%d" % known[1]
            seq = job.next_seq(stored, self.config)
            seqs[keys.queue] = (keys, seq)
            ops += job.enter_ops(keys, job_id, parent.row, job.first_entry_score(parent.row, seq),
                                 ledger=self.ledger(keys), ready_ms=now)
            self.events.append((events.PROMOTED, keys.queue, job_id, now, None))
        if gone:
            ops.append((b"HDEL", row_key, *gone))
        return ops


def parse_args_policy(raw: bytes) -> bytes:
    """ONCHILDFAIL's value, lower-cased: fail, ignore or remove."""
    policy = raw.lower()
    if policy not in POLICIES:
        raise errors.INVALID_CHILD_POLICY()
    return policy

