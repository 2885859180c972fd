"""The front's own client of the cluster (emqd/cluster/nodes.py), against fake nodes on
127.0.0.1: the slot map from several nodes' views, and every request bounded."""

from __future__ import annotations

import time
from typing import Any

import pytest

from emqd.cluster.nodes import SLOTS, NodeError, Pipe, Topology, merge
from tests.cluster.fake_node import SILENT, FakeNode, cluster_nodes

P, R, S = "p" * 40, "r" * 40, "s" * 40


def test_where_views_disagree_the_newest_config_epoch_serves_the_slot() -> None:
    """A node that has not heard of the failover still names the old primary (epoch 1);
    the promoted replica's epoch 2 wins, and the old primary (failed) is no replica."""
    stale = cluster_nodes([(P, 7000, "myself,master", "-", 1, "0-16383"),
                           (R, 7001, "slave", P, 1, "")])
    fresh = cluster_nodes([(R, 7001, "myself,master", "-", 2, "0-16383"),
                           (P, 7000, "master,fail", "-", 1, "")])
    for answers in ([stale, fresh], [fresh, stale]):
        shards, named = merge(a.decode() for a in answers)
        assert shards[0] is not None and shards[SLOTS - 1] is shards[0]
        assert shards[0].primary == ("127.0.0.1", 7001) and shards[0].replicas == ()
        assert named == {("127.0.0.1", 7000), ("127.0.0.1", 7001)}


def test_a_replica_counts_unless_every_node_that_names_it_says_it_failed() -> None:
    master = (P, 7000, "master", "-", 1, "0-100 200 [300->-" + S + "]")
    one = cluster_nodes([master, (R, 7001, "slave,fail?", P, 1, "")])
    other = cluster_nodes([master, (R, 7001, "slave,fail", P, 1, "")])
    shards, _ = merge([one.decode(), other.decode()])
    assert shards[50] is not None and shards[50].replicas == (("127.0.0.1", 7001),)
    assert shards[200] is shards[50] and shards[150] is None and shards[300] is None
    shards, _ = merge([other.decode(), other.decode()])
    assert shards[0] is not None and shards[0].replicas == ()


async def test_a_pipe_answers_in_order_and_gives_a_silent_node_up_at_its_deadline() -> None:
    answers: dict[bytes, Any] = {b"A": 1, b"B": NodeError("ERR no"), b"C": SILENT}
    node = await FakeNode(lambda argv: answers[argv[0]]).start()
    pipe = Pipe(node.address)
    try:
        first, second = pipe.exchange([b"*1\r\n$1\r\nA\r\n"], 1.0), pipe.exchange(
            [b"*1\r\n$1\r\nB\r\n", b"*1\r\n$1\r\nA\r\n"], 1.0)
        assert await first == [1]
        error, one = await second
        assert isinstance(error, NodeError) and error.text == "ERR no" and one == 1
        with pytest.raises(NodeError):
            await pipe.call((b"B",), 1.0)
        started = time.monotonic()
        silent = pipe.exchange([b"*1\r\n$1\r\nC\r\n"], 0.2)
        behind = pipe.exchange([b"*1\r\n$1\r\nA\r\n"], 5.0)
        with pytest.raises(TimeoutError):
            await silent
        with pytest.raises(TimeoutError):
            await behind  # on the same connection: given up with it
        assert time.monotonic() - started < 1.0
        assert await pipe.call((b"A",), 1.0) == 1  # a fresh connection
        assert node.connections == 2
    finally:
        pipe.close(ConnectionError("done"))
        await node.close()


async def test_a_read_of_the_map_asks_every_node_at_once_and_waits_for_none_too_long() -> None:
    good: FakeNode | None = None

    def answer(argv: list[bytes]) -> Any:
        assert good is not None
        return cluster_nodes([(P, good.port, "myself,master", "-", 1, "0-16383")])

    good = await FakeNode(answer).start()
    silent = await FakeNode(lambda argv: SILENT).start()
    topology = Topology([silent.address, good.address], 0.3)
    try:
        started = time.monotonic()
        first = topology.refresh()
        assert topology.refresh() is first  # one read at a time, shared
        assert await first is True
        assert time.monotonic() - started < 1.0  # the silent node held it 0.3 s at most
        assert topology.primary(1234) == good.address
        assert len(silent.requests) == 1 and len(good.requests) == 1
    finally:
        topology.close()
        await good.close()
        await silent.close()


async def test_moved_reads_the_map_again_and_the_command_goes_to_the_new_primary() -> None:
    nodes: list[FakeNode] = []

    def view() -> bytes:
        # after the move, the second node serves every slot, under a newer epoch
        old, new = nodes
        return cluster_nodes([(P, old.port, "master", "-", 1, ""),
                              (R, new.port, "master", "-", 2, "0-16383")])

    def old_answer(argv: list[bytes]) -> Any:
        if argv[0] == b"CLUSTER":
            return view() if len(nodes[0].requests) > 1 else cluster_nodes(
                [(P, nodes[0].port, "master", "-", 1, "0-16383")])
        return NodeError(f"MOVED 1 127.0.0.1:{nodes[1].port}")

    nodes.append(await FakeNode(old_answer).start())
    nodes.append(await FakeNode(lambda argv: view() if argv[0] == b"CLUSTER" else b"v").start())
    topology = Topology([nodes[0].address], 1.0)
    try:
        assert await topology.refresh()
        assert topology.primary(0) == nodes[0].address
        assert await topology.call(0, (b"GET", b"k")) == b"v"
        assert topology.primary(0) == nodes[1].address
        assert [argv for argv in nodes[1].requests if argv[0] == b"GET"] == [[b"GET", b"k"]]
    finally:
        topology.close()
        for node in nodes:
            await node.close()


async def test_scatter_sends_one_pipeline_a_node_and_a_silent_one_fails_only_its_own() -> None:
    nodes: list[FakeNode] = []

    def answer(argv: list[bytes]) -> Any:
        if argv[0] == b"CLUSTER":
            return cluster_nodes([(P, nodes[0].port, "master", "-", 1, "0-8191"),
                                  (R, nodes[1].port, "master", "-", 2, "8192-16383")])
        return int(argv[1])

    nodes.append(await FakeNode(answer).start())
    nodes.append(await FakeNode(lambda argv: answer(argv) if argv[0] == b"CLUSTER"
                                else SILENT).start())
    topology = Topology([nodes[0].address], 1.0)
    try:
        assert await topology.refresh()
        requests = [(slot, b"*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n" % (len(str(i)), i))
                    for i, slot in enumerate([1, 9000, 2, 9001, 3])]
        started = time.monotonic()
        results = await topology.scatter(requests, 0.3)
        assert time.monotonic() - started < 1.0
        assert [results[0], results[2], results[4]] == [0, 2, 4]
        assert all(isinstance(results[i], TimeoutError) for i in (1, 3))
    finally:
        topology.close()
        for node in nodes:
            await node.close()


async def test_a_node_that_refuses_connections_fails_a_call_at_once() -> None:
    node = await FakeNode(lambda argv: 1).start()
    address = node.address
    await node.close()
    pipe = Pipe(address)
    started = time.monotonic()
    with pytest.raises(OSError):
        await pipe.call((b"PING",), 5.0)
    assert time.monotonic() - started < 2.0
