"""The Workers page: every connected worker, and the jobs it holds now.

A worker is known by the name it gives its connections (CLIENT SETNAME, in the
form of emqd/sessions/worker_name.py: host, pid, queues, concurrency, start), which the
emqd Worker sets and any client can; a worker's pooled connections share it and
are one row. Which jobs it holds comes from the rows themselves: CLAIM and
EXTEND from a named connection write its CLIENT ID as `holder`, and a lease
granted in this process (`lease_epoch` is this run_id, or in a cluster the
queue's term) whose holder is one of
the worker's connections is the worker's. So a held job shows here after its
worker's next heartbeat even across a restart or a reconnect.

Each worker in the worker form has Quiet, Stop and Resume buttons: the page
shows what it is asked now (the strongest of its queues' instructions, EMQ.BEAT's
answer: stop, quiet or run), and each button sends EMQ.WORKER for every queue
its name lists (actions.py `order_worker`), which it learns at its next beat.

Cost: O(clients) for the workers and O(active jobs) for what they hold, read
in one pass of every queue's `active` set and bounded by ACTIVE_SHOWN rows
(the page says when it stopped there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from emqd import clock
from emqd.compat.numbers import parse_int
from emqd.core import Core, Session
from emqd.http import reading
from emqd.http.context import Dashboard
from emqd.http.relay import RELAY
from emqd.rules.args import is_queue_name
from emqd.rules.job import CLAIMED_MS, HOLDER, LEASE_EPOCH
from emqd.sessions import worker_name
from emqd.store.keyspace import Keyspace

ACTIVE_SHOWN = 10_000  # active rows one page reads, at most
NOTICES = {
    "quiet": "The worker is asked to claim nothing more: it learns it at its next beat, and "
             "finishes what it holds.",
    "stop": "The worker is asked to finish what it holds and exit: it learns it at its next "
            "beat.",
    "run": "The worker is asked to go on claiming.",
}
HELD_LISTED = 50  # a worker's held jobs listed by id (the rest are counted)


@dataclass(frozen=True, slots=True)
class Held:
    queue: bytes
    id: bytes
    claimed_ms: int | None


@dataclass(slots=True)
class Worker:
    """One worker: the connections that share its name, and the jobs they hold."""

    name: str
    known: worker_name.WorkerName | None  # None: a name not in the worker form
    raw: bytes  # its name as its connections gave it
    addresses: set[str] = field(default_factory=set)  # where its own connections come from
    connections: int = 0  # its own connections (not another front's links for it)
    oldest_ms: int | None = None  # when its oldest connection was made
    held: list[Held] = field(default_factory=list)
    order: str = "run"  # what it is asked: run, quiet or stop (its queues' strongest)

    @property
    def since_ms(self) -> int:
        """When it started (its name says), else when its oldest connection was made."""
        if self.known is not None and self.known.started_ms is not None:
            return self.known.started_ms
        return self.oldest_ms or 0

    def connected(self, session: Session) -> None:
        """One more of its connections (a front's link for it counts for its jobs only)."""
        if session.forwarded:
            return
        self.connections += 1
        self.addresses.add(session.addr.rpartition(":")[0] or session.addr)
        self.oldest_ms = min(self.oldest_ms or session.created_ms, session.created_ms)


@dataclass(frozen=True, slots=True)
class Roster:
    workers: list[Worker]
    unheld: list[Held]  # active jobs no connected worker holds
    read: int  # active rows read
    cut: bool  # ACTIVE_SHOWN rows were read and more are active
    fronts: list[str] = field(default_factory=list)  # cluster mode: fronts that did not answer


def roster(state: Core) -> Roster:
    """This server's workers (in cluster mode: this front's, with the jobs of the queues
    it owns held by a worker connected to another front, through that front's link)."""
    by_name: dict[bytes, Worker] = {}
    by_id: dict[bytes, Worker] = {}
    for session in state.clients.values():
        if not session.name:
            continue
        text = session.name.decode("utf-8", "backslashreplace")
        found = by_name.get(session.name)
        if found is None:
            found = by_name[session.name] = Worker(text, worker_name.parse(text), session.name)
        found.connected(session)
        by_id[b"%d" % session.id] = found
    unheld: list[Held] = []
    read = 0
    cut = False
    keyspace = state.keyspace
    for queue in reading.queue_names(keyspace):
        epoch = state.epoch_of(queue)  # this process's leases on the queue (a cluster's term)
        for job_id in reading.ids_of(keyspace, queue, "active"):
            if read == ACTIVE_SHOWN:
                cut = True
                break
            read += 1
            row = reading.job_row(keyspace, queue, job_id) or {}
            claimed = row.get(CLAIMED_MS)
            held = Held(queue, job_id, None if claimed is None else parse_int(claimed))
            holder = by_id.get(row.get(HOLDER, b"")) if row.get(LEASE_EPOCH) == epoch else None
            (unheld if holder is None else holder.held).append(held)
    workers = [worker for worker in by_name.values()
               if worker.known is not None or worker.held]
    for worker in workers:
        worker.order = order_of(keyspace, worker)
    workers.sort(key=lambda worker: (worker.known is None, worker.name))
    return Roster(workers, unheld, read, cut)


STRENGTH = {b"run": 0, b"quiet": 1, b"stop": 2}


def order_of(keyspace: Keyspace, worker: Worker) -> str:
    """The strongest instruction any of the worker's queues holds for it (stop > quiet)."""
    if worker.known is None:
        return "run"
    name = worker.raw
    orders = [reading.worker_order(keyspace, queue.encode(), name)
              for queue in worker.known.queues if is_queue_name(queue.encode())]
    return max(orders, key=STRENGTH.__getitem__, default=b"run").decode()


async def workers_page(request: web.Request) -> web.Response:
    """GET /workers: the connected workers, what each holds, and the jobs nobody holds; in
    cluster mode, every front's, joined by worker name (`joined`)."""
    dashboard = Dashboard.of(request)
    found = roster(dashboard.core)
    relay = request.app.get(RELAY)
    if relay is not None:
        found = joined(found, await relay.from_every_front(request, HELD_PATH))
    context: dict[str, Any] = {"roster": found, "listed": HELD_LISTED, "now": clock.now_ms(),
                               "shown": ACTIVE_SHOWN, "notice": NOTICES.get(
                                   request.query.get("done", ""))}
    return dashboard.render(request, "workers.html", **context)


# --- cluster mode: every front's roster, joined ------------------------------------------
HELD_PATH = "/workers/held"
Exported = dict[str, Any]  # a roster as JSON: bytes as latin-1 text, so that they come back


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def exported(found: Roster) -> Exported:
    """This front's roster as another front's Workers page reads it (`held_here`)."""
    def jobs(held: list[Held]) -> list[list[Any]]:
        return [[_text(job.queue), _text(job.id), job.claimed_ms] for job in held]

    return {"workers": [{"name": _text(worker.raw), "addresses": sorted(worker.addresses),
                         "connections": worker.connections, "oldest_ms": worker.oldest_ms,
                         "held": jobs(worker.held), "order": worker.order}
                        for worker in found.workers],
            "unheld": jobs(found.unheld), "read": found.read, "cut": found.cut}


async def held_here(request: web.Request) -> web.Response:
    """GET /workers/held: this server's own roster as JSON (what another front's Workers
    page joins with its own)."""
    return web.json_response(exported(roster(Dashboard.of(request).core)))


def _held(listed: list[list[Any]]) -> list[Held]:
    return [Held(queue.encode("latin-1"), job_id.encode("latin-1"),
                 claimed if type(claimed) is int else None)
            for queue, job_id, claimed in listed]


def joined(found: Roster, others: dict[str, Exported | None]) -> Roster:
    """This front's roster and the other fronts' (`others`: each front's address and its
    roster, None when it did not answer), one row a worker name: a worker connected
    here that holds jobs of a queue another front owns (its claims went there through
    this front's link, which carries its name) shows them as its own."""
    by_name = {worker.raw: worker for worker in found.workers}
    unheld, read, cut = list(found.unheld), found.read, found.cut
    silent = []
    for front, other in sorted(others.items()):
        if other is None:
            silent.append(front)
            continue
        for entry in other["workers"]:
            raw = entry["name"].encode("latin-1")
            worker = by_name.get(raw)
            if worker is None:
                text = raw.decode("utf-8", "backslashreplace")
                worker = by_name[raw] = Worker(text, worker_name.parse(text), raw)
            worker.addresses.update(entry["addresses"])
            worker.connections += entry["connections"]
            if entry["oldest_ms"] is not None:
                worker.oldest_ms = min(worker.oldest_ms or entry["oldest_ms"],
                                       entry["oldest_ms"])
            worker.held += _held(entry["held"])
            worker.order = max(worker.order, entry["order"], key=lambda o: STRENGTH[o.encode()])
        unheld += _held(other["unheld"])
        read += other["read"]
        cut = cut or other["cut"]
    workers = sorted((worker for worker in by_name.values()
                      if worker.known is not None or worker.held),
                     key=lambda worker: (worker.known is None, worker.name))
    return Roster(workers, unheld, read, cut, silent)
