"""What ties a job to others beyond its own queue's sets, in one place for every verb.

Two features put such ties in a row: flows (rules/flows.py: a child names its
parent in `parent`, a parent has `children` and a record) and unique jobs
(rules/unique.py: `unique` names the key the job holds). A verb that ends a
job's life (COMPLETE, a death by FAIL, the sweep or CLAIM), deletes it
(REMOVE) or revives it (REVIVE) must keep them right in the same plan. Most
rows have neither, and the hot verbs must not pay for either: `tied(row)` is
one lookup by the row's shared schema, and only a tied row builds a `Ties`.

Verbs do not use `Ties` themselves: they build their plan's tail with an
`Ending`, whose `finish()` puts the ops in the one order they must come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from emqd.commit.events import Event
from emqd.commit.plan import AGING, Due, Op
from emqd.config import Config
from emqd.layout import QueueKeys
from emqd.rules import flows, job, lanes, retention, unique
from emqd.rules.settings import Settings
from emqd.store import hash as hashes
from emqd.store.hash import BigHash, Hash
from emqd.store.keyspace import View

_TIES: Final = (flows.PARENT, flows.CHILDREN, unique.UNIQUE)
_tied: Final[dict[object, bool]] = {}  # a row's schema mark -> whether it is tied
_TIED_MAX: Final = 4096


def tied(row: Hash) -> bool:
    """Whether the row has a parent, children or a unique key (cached per row schema)."""
    if isinstance(row, BigHash):
        return any(name in row for name in _TIES)
    mark = hashes.mark(row)
    known = _tied.get(mark)
    if known is None:
        if len(_tied) >= _TIED_MAX:
            _tied.clear()
        slot = hashes.schema(row).slot
        known = _tied[mark] = any(name in slot for name in _TIES)
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
        # A completed parent keeps its record (its children and their results) while its
        # row lives: retention deletes the two together (retention.trim_ops).
        self.own += unique.release_ops(self.view, self.keys, job_id, row)

    def died(self, job_id: bytes, row: Hash, how: bytes = b"died") -> None:
        if hashes.has(row, flows.PARENT):
            self.flows.died(self.keys.job(job_id), row, how)
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

    @property
    def events(self) -> list[Event]:
        return self.flows.events

    @property
    def due(self) -> list[Due]:
        return self.flows.due


class Ending:
    """The tail of a plan that ends jobs (COMPLETE, a death by FAIL, the sweep or CLAIM, a
    CANCEL), deletes them (REMOVE) or revives them (REVIVE), in the one order each needs:

        the verb's own ops (`ops`: it appends them as it goes)
        what the jobs are tied to (flows' parents and records, unique keys: `Ties`)
        the ended jobs' entry into `into` (completed, dead or cancelled), counted and
            trimmed:
            after the ties, so a parent that dies of its child is trimmed with it, and
            a trim that deletes a row comes after anything written to it
        the lanes' settle (slots given back, the ring set right)

    A verb calls `completed` / `died` / `cancelled` / `removed` / `revived` for each job, then
    `finish()`. Ties are built only for a tied row, so a hot verb pays for none.
    `busy`: the ids of every job the verb moves itself (flows leave them alone)."""

    def __init__(self, view: View, keys: QueueKeys, config: Config, now_ms: int,
                 ledger: lanes.Ledger, busy: Sequence[bytes], into: bytes | None = None,
                 settings: Settings | None = None) -> None:
        self.view = view
        self.keys = keys
        self.config = config
        self.now_ms = now_ms
        self.ledger = ledger
        self.busy = busy
        self.into = into  # job.COMPLETED, DEAD or CANCELLED: where `ended` go; None: nowhere
        self.settings = settings
        self.ops: list[Op] = []
        self.happened: list[Event] = []
        self.due: list[Due] = []
        self.ended: list[bytes] = []  # ids entering `into`, in order
        self._ties: Ties | None = None

    def _tie(self) -> Ties:
        if self._ties is None:
            self._ties = Ties(self.view, self.keys, self.config, self.now_ms, self.ledger,
                              {self.keys.job(job_id) for job_id in self.busy})
        return self._ties

    def completed(self, job_id: bytes, row: Hash, result: bytes | None) -> None:
        self.ended.append(job_id)
        if tied(row):
            self._tie().completed(job_id, row, result)

    def died(self, job_id: bytes, row: Hash | None) -> None:
        self.ended.append(job_id)
        if row is not None and tied(row):
            self._tie().died(job_id, row)

    def removed(self, job_id: bytes, row: Hash) -> None:
        if tied(row):
            self._tie().removed(job_id, row)

    def cancelled(self, job_id: bytes, row: Hash) -> None:
        """EMQ.CANCEL ends it: to its parent as a death is (its ONCHILDFAIL rule decides),
        its unique key free."""
        self.ended.append(job_id)
        if tied(row):
            self._tie().died(job_id, row, job.CANCELLED)

    def revived(self, job_id: bytes, row: Hash) -> None:
        if tied(row):
            self._tie().revived(job_id, row)

    def finish(self, settle: bool = True) -> list[Op]:
        """The plan's ops, in order (`settle` False: the verb settles its ledger itself,
        after ops of its own: CLAIM's rate window). `happened` and `due` are complete
        after it."""
        ops = self.ops
        ties = self._ties
        if ties is not None:
            ties.resolve()
            if self.into == job.DEAD:  # its parents that die here are counted with it
                self.ended += ties.take_deaths()
            ops += ties.ops()
            self.happened += ties.events
            self.due += ties.due
        if self.ended and self.into is not None:
            settings = self.settings
            assert settings is not None
            keep, keep_ms = retention.kept(settings, self.into.decode())
            ops += job.finish_ops(self.view, self.keys, self.into, self.ended, self.now_ms,
                                  keep, keep_ms)
            if keep_ms:
                self.due.append((AGING, self.keys.queue, self.now_ms + keep_ms))
        if settle:
            ops += lanes.settle(self.ledger)
        return ops
