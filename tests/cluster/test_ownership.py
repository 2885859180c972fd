"""Leases (emqd/cluster/ownership.py) against fake nodes on 127.0.0.1: renewals go out a
primary's in one script call, and a silent primary holds up only its own."""

from __future__ import annotations

import time
from typing import Any

from emqd.cluster import scripts
from emqd.cluster.names import owner_key, written_key
from emqd.cluster.nodes import NodeError, Topology
from emqd.cluster.ownership import Lease, Leases, slot_of
from tests.cluster.fake_node import SILENT, FakeNode, cluster_nodes

P, R = "p" * 40, "r" * 40


def two_queues_on_two_primaries() -> tuple[bytes, bytes]:
    """A queue whose slot is below 8192 and one whose slot is above."""
    names = [b"q%d" % i for i in range(100)]
    return (next(q for q in names if slot_of(q) < 8192),
            next(q for q in names if slot_of(q) >= 8192))


async def test_renewals_go_a_primary_s_in_one_call_and_a_silent_one_holds_only_its_own(
        ) -> None:
    nodes: list[FakeNode] = []
    low, high = two_queues_on_two_primaries()

    def view(argv: list[bytes]) -> Any:
        return cluster_nodes([(P, nodes[0].port, "master", "-", 1, "0-8191"),
                              (R, nodes[1].port, "master", "-", 2, "8192-16383")])

    def first(argv: list[bytes]) -> Any:
        if argv[0] == b"CLUSTER":
            return view(argv)
        assert argv[:4] == [b"EVAL", scripts.RENEW.encode(), b"0", b"3000"]
        values = argv[6::3]  # (owner key, written key, value) a lease
        return [3 if value == b"ours" else -1 for value in values]  # the value decides

    nodes.append(await FakeNode(first).start())
    nodes.append(await FakeNode(lambda argv: view(argv) if argv[0] == b"CLUSTER"
                                else SILENT).start())
    topology = Topology([nodes[0].address], 1.0)
    try:
        assert await topology.refresh()
        leases = Leases(topology, b"127.0.0.1:1", 3000)
        mine, stolen, far = Lease(low, b"ours", 0.0), Lease(low, b"theirs", 0.0), \
            Lease(high, b"ours", 0.0)
        before = time.monotonic()
        results = await leases.renew([mine, stolen, far], 0.3)
        assert results[:2] == [3, -1] and isinstance(results[2], TimeoutError)
        assert mine.valid_until >= before + leases.held_s
        assert stolen.valid_until == 0.0 and far.valid_until == 0.0
        renewals = [argv for argv in nodes[0].requests if argv[0] == b"EVAL"]
        assert renewals == [[b"EVAL", scripts.RENEW.encode(), b"0", b"3000",
                             owner_key(low), written_key(low), b"ours",
                             owner_key(low), written_key(low), b"theirs"]]  # one call
        assert nodes[0].connections == 1
    finally:
        topology.close()
        for node in nodes:
            await node.close()


async def test_a_refused_renewal_is_an_answer_not_an_exception() -> None:
    node: FakeNode | None = None

    def answer(argv: list[bytes]) -> Any:
        assert node is not None
        if argv[0] == b"CLUSTER":
            return cluster_nodes([(P, node.port, "master", "-", 1, "0-16383")])
        return NodeError("CLUSTERDOWN The cluster is down")

    node = await FakeNode(answer).start()
    topology = Topology([node.address], 1.0)
    try:
        assert await topology.refresh()
        results = await Leases(topology, b"127.0.0.1:1", 3000).renew(
            [Lease(b"q", b"ours", 0.0)], 0.5)
        assert isinstance(results[0], NodeError) and results[0].text.startswith("CLUSTERDOWN")
    finally:
        topology.close()
        await node.close()
