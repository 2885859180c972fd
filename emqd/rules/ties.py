"""What ties a job to others beyond its own queue's sets, in one place for every verb.

Two features put such ties in a row: flows (rules/flows.py: a child names its
parent in `parent`, a parent has `children` and a record) and unique jobs
(rules/unique.py: `unique` names the key the job holds). A verb that ends a
job's life (COMPLETE, a death by FAIL, the sweep or CLAIM), deletes it
(REMOVE) or revives it (REVIVE) must keep them right in the same plan. Most
rows have neither, and the hot verbs must not pay for either: `tied(row)` is
one lookup by the row's shared schema, and only a tied row builds a `Ties`.

Usage, in a verb's plan: `ties = Ties(view, keys, config, now, ledger, busy)`
(`ledger`: the verb's own lane ledger of `keys`' queue; `busy`: the row keys
of the jobs the verb moves itself), then `completed` / `died` / `removed` /
`revived` for each tied job, then `resolve()`; the verb's own `finish_ops` of
DEAD takes `take_deaths()` (parents of its queue that die with their child);
`join(ops, happened, due)` then adds the ties' ops, events and due times to
the verb's own, and its own `lanes.settle(ledger)` comes after.
"""

from __future__ import annotations

from typing import Final

from emqd.config import Config
from emqd.events import Event
from emqd.keys import QueueKeys
from emqd.plan import Due, Op
from emqd.rules import flows, lanes, unique
from emqd.store import hash as hashes
from emqd.store.hash import BigHash, Hash, Schema
from emqd.store.keyspace import View

_TIES: Final = (flows.PARENT, flows.CHILDREN, unique.UNIQUE)
_tied: Final[dict[Schema, bool]] = {}
_TIED_MAX: Final = 4096


def tied(row: Hash) -> bool:
    """Whether the row has a parent, children or a unique key (cached per row schema)."""
    if isinstance(row, BigHash):
        return any(name in row for name in _TIES)
    schema = row[0]
    known = _tied.get(schema)
    if known is None:
        if len(_tied) >= _TIED_MAX:
            _tied.clear()
        known = _tied[schema] = any(name in schema.slot for name in _TIES)
    return known


class Ties:
    """The ties of the jobs one plan ends, removes or revives."""

    def __init__(self, view: View, keys: QueueKeys, config: Config, now_ms: int,
                 ledger: lanes.Ledger, busy: set[bytes]) -> None:
        self.view = view
        self.keys = keys
        self.flows = flows.Flows(view, config, now_ms, {keys.queue: ledger}, busy)
        self.own: list[Op] = []  # keys freed, records deleted

    def completed(self, job_id: bytes, row: Hash, result: bytes | None) -> None:
        key = self.keys.job(job_id)
        if hashes.has(row, flows.PARENT):
            self.flows.completed(key, row, result)
        self.own += flows.record_ops(self.keys, job_id, row)  # a parent is done with it
        self.own += unique.release_ops(self.view, self.keys, job_id, row)

    def died(self, job_id: bytes, row: Hash) -> None:
        if hashes.has(row, flows.PARENT):
            self.flows.died(self.keys.job(job_id), row)
        self.own += unique.release_ops(self.view, self.keys, job_id, row)

    def removed(self, job_id: bytes, row: Hash) -> None:
        if hashes.has(row, flows.PARENT):
            self.flows.removed_child(self.keys.job(job_id), row)
        self.own += flows.record_ops(self.keys, job_id, row)
        self.own += unique.release_ops(self.view, self.keys, job_id, row)

    def revived(self, job_id: bytes, row: Hash) -> None:
        if hashes.has(row, flows.PARENT):
            self.flows.revived(self.keys.job(job_id), row)
        self.own += unique.retake_ops(self.view, self.keys, job_id, row, self.flows.now_ms)

    def resolve(self) -> None:
        self.flows.resolve()

    def take_deaths(self) -> list[bytes]:
        """Parents of the verb's own queue that die in this plan (for its `finish_ops`)."""
        return self.flows.take_deaths(self.keys.queue)

    def ops(self) -> list[Op]:
        return [*self.own, *self.flows.ops()]

    def join(self, ops: list[Op], happened: list[Event], due: list[Due]) -> None:
        """Add what the ties write, tell and schedule to the verb's own lists (after
        `resolve`, and `take_deaths` where the verb finishes deaths itself)."""
        ops += self.ops()
        happened += self.events
        due += self.due

    @property
    def events(self) -> list[Event]:
        return self.flows.events

    @property
    def due(self) -> list[Due]:
        return self.flows.due
