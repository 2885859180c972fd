"""emqd/http/cluster_queues.py: an overview row from what the cluster holds of a queue.

Each case is what the cluster holds (its keys, as a Redis Cluster would have them),
answered to the overview's own reads (`_commands`, in their order) the way
Topology.scatter gives them back: a value, an error reply as a NodeError, or the
exception of a node that did not answer. `_row` then makes the row the page shows.
"""

from __future__ import annotations

from typing import Any

import pytest

from emqd.cluster.nodes import NodeError
from emqd.http import cluster_queues
from emqd.http.cluster_queues import UNKNOWN, Row
from emqd.http.reading import COUNTERS, STATES, QueueFigures

SILENT = object()  # a key whose node did not answer
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
OWNER = b"emq:{q}:owner"
META = b"emq:{q}:meta"


def answered(command: tuple[bytes, ...], cluster: dict[bytes, Any]) -> Any:
    """One of the overview's reads (GET, ZCARD or HGET) as the cluster answers it: a string
    is bytes, a sorted set its size (an int), a hash a dict."""
    verb, key = command[0], command[1]
    value = cluster.get(key)
    if value is SILENT:
        return TimeoutError()
    expected = {b"GET": bytes, b"ZCARD": int, b"HGET": dict}[verb]
    if value is not None and type(value) is not expected:
        return NodeError(WRONGTYPE)
    if verb == b"GET":
        return value
    if verb == b"ZCARD":
        return value or 0
    return None if value is None else value.get(command[2])


def row_of(cluster: dict[bytes, Any]) -> Row:
    replies = [answered(command, cluster) for command in cluster_queues._commands(b"q")]
    assert len(replies) == cluster_queues.PER_QUEUE
    return cluster_queues._row(b"q", replies)


def expected(owner: str | None, paused: bool = False, **figures: int | None) -> Row:
    """The row of queue q: every count and total 0 but those named (`pending`, `dead_jobs`
    for the dead set's count, `dead` for the dead counter...)."""
    counts = {state: figures.get(f"{state}_jobs" if state in COUNTERS else state, 0)
              for state in STATES}
    totals = {name: figures.get(name, 0) for name in COUNTERS}
    return Row(QueueFigures(name=b"q", counts=counts, totals=totals, latency_ms=None,
                            paused=paused, lanes_active=None, lanes_ready=None),
               owner, False)


CASES = [
    pytest.param({}, expected(None), id="registered, nothing held: nobody owns it, all 0"),
    pytest.param(
        {OWNER: b"7 10.0.0.2:7001", b"emq:{q}:pending": 3, b"emq:{q}:active": 2,
         b"emq:{q}:scheduled": 1, b"emq:{q}:waiting": 4, b"emq:{q}:dead": 5,
         b"emq:{q}:completed": 6, b"emq:{q}:cancelled": 7,
         META: {b"added": b"40", b"lanes_pending": b"10", b"seq": b"40"},
         b"emq:{q}:metrics": {b"failed": b"8", b"retried": b"9", b"stalled": b"11",
                              b"revived": b"12", b"cancelled": b"13"},
         b"emq:{q}:metrics:completed": {b"count": b"14"},
         b"emq:{q}:metrics:failed": {b"count": b"15"}},
        expected("10.0.0.2:7001", pending=13, active=2, scheduled=1, waiting=4, dead_jobs=5,
                 completed_jobs=6, cancelled_jobs=7, added=40, failures=8, retried=9,
                 stalled=11, revived=12, cancelled=13, completed=14, dead=15),
        id="owned elsewhere: its owner's address, pending flat + lanes, every counter"),
    pytest.param({OWNER: b"1 front-b:7000", META: {b"paused": b"1"}},
                 expected("front-b:7000", paused=True), id="paused"),
    pytest.param({META: {b"paused": b"0"}}, expected(None), id="resumed"),
    pytest.param({OWNER: {b"not": b"a string"}}, expected(UNKNOWN),
                 id="an owner key of the wrong type: owner unknown"),
    pytest.param({OWNER: SILENT, b"emq:{q}:active": SILENT, b"emq:{q}:metrics": SILENT,
                  b"emq:{q}:dead": 2},
                 expected(UNKNOWN, active=None, failures=None, retried=None, stalled=None,
                          revived=None, cancelled=None, dead_jobs=2),
                 id="a silent node: what it holds is unknown, the rest is read"),
    pytest.param({b"emq:{q}:pending": {b"a": b"hash"}, b"emq:{q}:completed": 2,
                  META: {b"lanes_pending": b"3"}},
                 expected(None, pending=None, completed_jobs=2),
                 id="pending of the wrong type: pending unknown, lanes or not"),
    pytest.param({b"emq:{q}:pending": 2, META: {b"lanes_pending": b"many"}},
                 expected(None, pending=None), id="lanes_pending not a number: pending unknown"),
    pytest.param({META: {b"added": b"x"}, b"emq:{q}:metrics:completed": {b"count": b"-2"},
                  b"emq:{q}:metrics:failed": 5},
                 expected(None, added=None, completed=-2, dead=None),
                 id="counters not a number or of the wrong type are unknown, others as held"),
]


@pytest.mark.parametrize(("cluster", "row"), CASES)
def test_a_row_is_what_the_cluster_holds_of_the_queue(cluster: dict[bytes, Any],
                                                      row: Row) -> None:
    assert row_of(cluster) == row
