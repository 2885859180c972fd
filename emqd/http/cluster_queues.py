"""The overview of a front in cluster mode: every queue of the cluster, its owner, its counts.

A front's store holds only the queues it owns now (emqd/cluster/front.py), and
a queue nobody uses is owned by nobody, so the overview does not read the
store for the list: it reads the cluster's registry (`emq:queues`), in creation
order, QUEUES_PAGE names a page (`/?page=N`): 10,000 queues are 100 pages, and
a page costs the same whatever the cluster holds.

Each queue's owner is its owner key (a front's address, or nobody: an idle
queue is let go, emqd/cluster/front.py). A queue owned here is read from the
store, as in single mode. Every other queue's counts are read from what the
cluster holds of it: its sets' sizes and its counters (ZCARD and HGET, the
same keys the owner writes through, one pipeline a primary for the whole page,
`Topology.scatter`). Why the cluster and not the owner (EMQ.STATS forwarded):
the cluster is the only copy of a queue nobody owns, and asking it takes
nothing (a read forwarded to a queue nobody owns would take it) and asks no
other front; an owner's writes reach it batch by batch, so its figures are
behind the owner's by at most the batches on their way (milliseconds). Their
latency, lanes and per-minute charts are the owner's own (its store and its
samples): the queue's page shows them, served by the owner (relay.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emqd.cluster.names import REGISTRY, owner_key
from emqd.cluster.ownership import address_of, slot_of
from emqd.compat.numbers import parse_int
from emqd.http import reading
from emqd.http.reading import COUNTERS, STATES, QueueFigures
from emqd.layout import queue_keys
from emqd.rules.lanes import LANES_PENDING
from emqd.store.keyspace import Keyspace
from emqd.verbs.pause import PAUSED, is_paused
from emqd.wire.resp import encode_request

if TYPE_CHECKING:
    from emqd.cluster.front import Front

QUEUES_PAGE = 100  # queues an overview page lists
UNKNOWN = "?"  # the owner of a queue whose owner key could not be read


@dataclass(frozen=True, slots=True)
class Row:
    """One queue of the overview: its figures, its owner's address (None: nobody owns
    it), and whether it is owned here (its figures then are the store's, all of them)."""

    figures: QueueFigures
    owner: str | None
    here: bool


@dataclass(frozen=True, slots=True)
class Listing:
    total: int  # queues in the registry
    page: int
    pages: int
    rows: list[Row]
    error: str | None = None  # why the cluster's queues are not all listed


def _commands(queue: bytes) -> list[tuple[bytes, ...]]:
    """What the overview reads of a queue from the cluster, in the order `_row` reads it."""
    keys = queue_keys(queue)
    return [(b"GET", owner_key(queue)),
            *((b"ZCARD", getattr(keys, state)) for state in STATES),
            (b"HGET", keys.meta, LANES_PENDING), (b"HGET", keys.meta, PAUSED),
            *((b"HGET", key, field) for key, field in reading.counter_fields(keys).values())]


PER_QUEUE = 3 + len(STATES) + len(COUNTERS)


def _size(reply: Any) -> int | None:
    """A ZCARD's answer; None for an error (WRONGTYPE) or a node that did not answer."""
    return reply if type(reply) is int else None


def _stored(reply: Any) -> int | None:
    """An HGET of a counter: absent is 0, an error or a value not an integer is None."""
    if reply is None:
        return 0
    return parse_int(reply) if type(reply) is bytes else None


def _row(queue: bytes, replies: list[Any]) -> Row:
    owner, sizes = replies[0], replies[1:1 + len(STATES)]
    lanes_pending, paused = replies[1 + len(STATES):3 + len(STATES)]
    counts = {state: _size(size) for state, size in zip(STATES, sizes, strict=True)}
    waiting_lanes = _stored(lanes_pending)
    flat = counts["pending"]
    counts["pending"] = None if flat is None or waiting_lanes is None else flat + waiting_lanes
    totals = {name: _stored(reply)
              for name, reply in zip(COUNTERS, replies[3 + len(STATES):], strict=True)}
    figures = QueueFigures(name=queue, counts=counts, totals=totals, latency_ms=None,
                           paused=type(paused) is bytes and is_paused(paused),
                           lanes_active=None, lanes_ready=None)
    if type(owner) is bytes:
        shown: str | None = address_of(owner).decode("latin-1")
    else:
        shown = None if owner is None else UNKNOWN
    return Row(figures, shown, False)


async def listing(front: Front, keyspace: Keyspace, page: int, now_ms: int) -> Listing:
    """The registry's `page`th page, each queue with its owner and counts. Raises what a
    request to the cluster raises (emqd/cluster/nodes.py FAILED) when it does not answer."""
    topology = front.topology
    total: Any = await topology.call(slot_of(REGISTRY), (b"ZCARD", REGISTRY))
    first = (page - 1) * QUEUES_PAGE
    names: Any = await topology.call(slot_of(REGISTRY), (
        b"ZRANGE", REGISTRY, first, first + QUEUES_PAGE - 1))
    elsewhere = [queue for queue in names if queue not in front.held]
    requests = [(slot_of(queue), encode_request(command))
                for queue in elsewhere for command in _commands(queue)]
    replies = await topology.scatter(requests, front.timeout_s) if requests else []
    read = {queue: _row(queue, replies[i * PER_QUEUE:(i + 1) * PER_QUEUE])
            for i, queue in enumerate(elsewhere)}
    here = front.address.decode("latin-1")
    rows = [read.get(queue) or Row(reading.queue_figures(keyspace, queue, now_ms), here, True)
            for queue in names]
    return Listing(total, page, max(1, -(-total // QUEUES_PAGE)), rows)
