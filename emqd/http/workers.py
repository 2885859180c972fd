"""The Workers page: every connected worker, and the jobs it holds now.

A worker is known by the name it gives its connections (CLIENT SETNAME, in the
form of emqd/client/worker_name.py: host, pid, queues, concurrency, start), which the
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
from emqd.client import worker_name
from emqd.compat.numbers import parse_int
from emqd.core import Core
from emqd.http import reading
from emqd.http.context import Dashboard
from emqd.rules.args import is_queue_name
from emqd.rules.job import CLAIMED_MS, HOLDER, LEASE_EPOCH
from emqd.sessions.session import Session
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
    connections: list[Session]
    held: list[Held] = field(default_factory=list)
    order: str = "run"  # what it is asked: run, quiet or stop (its queues' strongest)

    @property
    def since_ms(self) -> int:
        """When it started (its name says), else when its oldest connection was made."""
        if self.known is not None and self.known.started_ms is not None:
            return self.known.started_ms
        return min(session.created_ms for session in self.connections)

    @property
    def addresses(self) -> list[str]:
        return sorted({session.addr.rpartition(":")[0] or session.addr
                       for session in self.connections})


@dataclass(frozen=True, slots=True)
class Roster:
    workers: list[Worker]
    unheld: list[Held]  # active jobs no connected worker holds
    read: int  # active rows read
    cut: bool  # ACTIVE_SHOWN rows were read and more are active


def roster(state: Core) -> Roster:
    by_name: dict[bytes, Worker] = {}
    by_id: dict[bytes, Worker] = {}
    for session in state.clients.values():
        if not session.name:
            continue
        text = session.name.decode("utf-8", "backslashreplace")
        found = by_name.get(session.name)
        if found is None:
            found = by_name[session.name] = Worker(text, worker_name.parse(text), [])
        found.connections.append(session)
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
    name = worker.connections[0].name
    orders = [reading.worker_order(keyspace, queue.encode(), name)
              for queue in worker.known.queues if is_queue_name(queue.encode())]
    return max(orders, key=STRENGTH.__getitem__, default=b"run").decode()


async def workers_page(request: web.Request) -> web.Response:
    """GET /workers: the connected workers, what each holds, and the jobs nobody holds."""
    dashboard = Dashboard.of(request)
    found = roster(dashboard.core)
    context: dict[str, Any] = {"roster": found, "listed": HELD_LISTED, "now": clock.now_ms(),
                               "shown": ACTIVE_SHOWN, "notice": NOTICES.get(
                                   request.query.get("done", ""))}
    return dashboard.render(request, "workers.html", **context)

