"""What a client is told when the cluster does not take a write: never OK, never twice.

A real cluster (3 primaries, a replica each) and fronts over it; a fault is made
with `CLIENT PAUSE ms WRITE` on a queue's primary (its scripts and WAITs wait,
and run once the pause ends: a write that may or may not be applied), with an
owner key written straight into the cluster (the next batch is fenced), or with
SIGSTOP of a front. Each case is one of issue 34's defects:

1. a CLAIM parked on the owner, woken by an ADD whose batch the cluster never
   took, was answered with the job and token 1, which the next owner handed out
   again;
2. a reply held behind another queue's slow write was released as it was after
   its own record failed; and a front that read the slot map while a shard had
   no replica acknowledged that shard's writes without one for good, after the
   replica came (its writes, which a failover would lose, answered OK while the
   replica could not take them);
3. a front re-sent a forwarded write the owner had answered TRYAGAIN for (it may
   have been applied): one OK, two jobs;
4. a request forwarded to a frozen owner was held until the owner woke.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from redis.exceptions import TryAgainError

from emqd.cluster.names import owner_key
from tests.cluster.conftest import need_redis
from tests.cluster.support import Cluster, just_renewed, owner_and_other, start_fronts, until
from tests.support import ServerProcess

LEASE_MS = 10_000


@pytest.fixture(scope="module")
def fronts(cluster: Cluster) -> Iterator[list[ServerProcess]]:
    started = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS),
                           "--cluster-timeout-ms", "1000")
    yield started
    for server in started:
        server.stop()


def cmd(port: int, *argv: object) -> object:
    with redis.Redis(port=port, socket_timeout=30) as client:
        return client.execute_command(*argv)


def topology_reads(server: ServerProcess) -> int:
    """How many times the front has read the cluster's slot map."""
    with redis.Redis(port=server.port) as client:
        return int(client.info("cluster")["emqd_cluster_topology_reads"])


def blocked(port: int) -> int:
    with redis.Redis(port=port) as client:
        return int(client.info("clients")["blocked_clients"])


@contextmanager
def writes_paused(cluster: Cluster, queue: bytes, ms: int) -> Iterator[None]:
    """The queue's primary runs no write (scripts included) for `ms`, then runs them; at
    the latest when the block ends (a pause must not reach into the next test)."""
    node = cluster.primary_of(owner_key(queue))
    with redis.Redis(port=node.port) as client:
        client.execute_command("CLIENT", "PAUSE", ms, "WRITE")
        try:
            yield
        finally:
            client.execute_command("CLIENT", "UNPAUSE")


def jobs_in_cluster(cluster: Cluster, queue: bytes) -> dict[bytes, dict[bytes, bytes]]:
    prefix = b"emq:{" + queue + b"}:job:"
    with cluster.client() as store:
        return {key[len(prefix):]: store.hgetall(key)
                for key in store.scan_iter(match=prefix + b"*", target_nodes="primaries")}


def test_a_claim_woken_by_a_write_the_cluster_never_took_is_not_answered_with_it(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    woken = "woken"
    assert cmd(fronts[0].port, "EMQ.ADD", woken, "first") == b"1"
    owner, _ = owner_and_other(fronts, woken)
    job, token = cmd(owner.port, "EMQ.CLAIM", woken, 60_000)[:2]  # type: ignore[index]
    assert cmd(owner.port, "EMQ.COMPLETE", woken, job, token) == b"OK"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = pool.submit(cmd, owner.port, "EMQ.CLAIM", woken, 60_000, "BLOCK", 8000)
        until(lambda: blocked(owner.port) == 1, 5, "the CLAIM parked")
        with writes_paused(cluster, woken.encode(), 2500):
            with pytest.raises(TryAgainError):
                cmd(owner.port, "EMQ.ADD", woken, "second", "ID", "j1")
            with pytest.raises(TryAgainError):
                parked.result(timeout=10)  # not [j1, 1, second]: the ADD it saw is not kept


def two_queues_on_two_primaries(cluster: Cluster, fronts: list[ServerProcess],
                                ) -> tuple[ServerProcess, bytes, bytes]:
    """Two queues one front owns, whose slots two primaries serve, and that front."""
    taken: dict[int, list[tuple[bytes, int]]] = {}
    for i in range(40):
        queue = f"held{i}"
        cmd(fronts[0].port, "EMQ.ADD", queue, "taken")
        owner, _ = owner_and_other(fronts, queue)
        node = cluster.primary_of(owner_key(queue.encode())).port
        mine: list[tuple[bytes, int]] = taken.setdefault(owner.port, [])
        elsewhere = [q for q, n in mine if n != node]
        if elsewhere:
            return owner, elsewhere[0], queue.encode()
        mine.append((queue.encode(), node))
    raise AssertionError("no two queues of one front on two primaries")


def test_a_reply_held_behind_another_queue_s_write_is_not_released_once_its_own_is_lost(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    owner, slow, fenced = two_queues_on_two_primaries(cluster, fronts)
    with cluster.client() as store:  # another front's term now: the next batch is fenced
        just_renewed(store, owner_key(fenced), LEASE_MS)
        store.set(owner_key(fenced), b"0" * 40 + b" 127.0.0.1:1")
    with writes_paused(cluster, slow, 600), \
            redis.Redis(port=owner.port, socket_timeout=30) as client:
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("EMQ.ADD", slow, "a")
        pipe.execute_command("EMQ.ADD", fenced, "b", "ID", "lost")
        replies = pipe.execute(raise_on_error=False)
    assert isinstance(replies[0], bytes)
    assert isinstance(replies[1], TryAgainError), replies[1]
    assert b"lost" not in jobs_in_cluster(cluster, fenced)


def test_a_forwarded_write_that_may_have_been_applied_is_not_sent_again(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    once = "once"
    assert cmd(fronts[0].port, "EMQ.ADD", once, "taken") == b"1"
    owner, other = owner_and_other(fronts, once)
    with writes_paused(cluster, once.encode(), 2500):  # the batch runs after the owner gave up
        with pytest.raises(TryAgainError):
            cmd(other.port, "EMQ.ADD", once, "twice?")
    time.sleep(1.0)  # the late batch is in (the pause is over), whoever owns the queue now
    payloads = [row.get(b"payload") for row in jobs_in_cluster(cluster, once.encode()).values()]
    assert payloads.count(b"twice?") <= 1, payloads


def test_a_request_forwarded_to_a_frozen_owner_is_answered_once_its_lease_runs_out(
        cluster_of_three: Cluster) -> None:
    """(Fronts of its own, on a cluster of its own: the queue goes to one of these two.)"""
    owner, other = start_fronts(cluster_of_three, 2, "--cluster-lease-ms", "2000",
                                "--cluster-timeout-ms", "1000")
    client = redis.Redis(port=other.port, socket_timeout=30)
    try:
        frozen = "frozen"
        assert cmd(owner.port, "EMQ.ADD", frozen, "x") == b"1"
        owner, other = owner_and_other([owner, other], frozen)
        client.close()
        client = redis.Redis(port=other.port, socket_timeout=30)
        assert client.execute_command("EMQ.STATS", frozen)[b"pending"] == 1  # forwarded
        os.kill(owner.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(TryAgainError):  # on the link made above: sent, unanswered
                client.execute_command("EMQ.STATS", frozen)
            waited = time.monotonic() - started
            assert waited < 2.0 + 1.0 + 1.0, waited  # the lease, the timeout, a look's pause
            stats = until(lambda: client.execute_command("EMQ.STATS", frozen), 5,
                          "another owner")
            assert stats[b"pending"] == 1
        finally:
            os.kill(owner.proc.pid, signal.SIGCONT)
    finally:
        client.close()
        owner.stop()
        other.stop()


def test_a_replica_that_joins_is_waited_for_within_a_second(cluster_of_three: Cluster) -> None:
    """The front reads the slot map every second: a shard that had no replica when it
    started gets one, and from then on a write is acknowledged only once the replica
    has it (the replica stopped, the write is answered TRYAGAIN, never OK)."""
    server = start_fronts(cluster_of_three, 1, "--cluster-timeout-ms", "1000")[0]
    replica = None
    try:
        assert cmd(server.port, "EMQ.ADD", "joined", "before") == b"1"  # acks 0: no replica
        replica = cluster_of_three.add_replica(cluster_of_three.primary_of(owner_key(b"joined")))
        reads = topology_reads(server)  # counted once every node lists the replica
        until(lambda: topology_reads(server) >= reads + 2, 10,
              "a whole map read after the replica joined")
        assert cmd(server.port, "EMQ.ADD", "joined", "with it") == b"2"
        replica.send_signal(signal.SIGSTOP)
        with pytest.raises(TryAgainError):
            cmd(server.port, "EMQ.ADD", "joined", "without it")
    finally:
        if replica is not None:
            replica.send_signal(signal.SIGCONT)
        server.stop()


@pytest.fixture
def cluster_of_three() -> Iterator[Cluster]:
    """3 primaries and no replica, of this test's own."""
    need_redis()
    started = Cluster.start(3, 0)
    yield started
    started.stop()
