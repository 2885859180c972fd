"""Cluster mode at scale (issue 35), in the long suite (scripts/test-partitions): ten
thousand queues over two fronts, served on demand once idle, and by a front killed and
restarted; a queue of a million jobs taken over by another front. The bounds here are a
client's waits; how fast and how cheaply is the benchmark's (`emqd-bench --scenarios
cluster-scale`, docs/PERFORMANCE.md).
"""

from __future__ import annotations

import concurrent.futures
import random
import signal
import time
from collections.abc import Iterator

import pytest
import redis

from tests.cluster.conftest import need_redis
from tests.cluster.support import (
    Cluster,
    owner_and_other,
    start_fronts,
    until,
)
from tests.support import ServerProcess, start_emqd

QUEUES = 10_000
LEASE_MS = 5000  # the default: what a user runs
PAYLOAD = "p" * 100  # the benchmark's: a million of them load for longer than "one"s

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    need_redis()
    started = Cluster.start()
    yield started
    started.stop()


def claim_within(server: ServerProcess, queue: str, bound_s: float) -> None:
    with redis.Redis(port=server.port, socket_timeout=bound_s + 5) as client:
        started = time.monotonic()
        got = client.execute_command("EMQ.CLAIM", queue, 60_000)
        waited = time.monotonic() - started
    assert got and got[2] == b"one", (queue, got)
    assert waited < bound_s, f"CLAIM on {queue} waited {waited:.2f}s"


def create(server: ServerProcess, queues: list[str]) -> None:
    with redis.Redis(port=server.port, socket_timeout=60) as client:
        for queue in queues:
            assert client.execute_command("EMQ.ADD", queue, "one")


def test_ten_thousand_queues_are_served_on_demand_and_by_a_front_restarted(
        cluster: Cluster) -> None:
    flags = ("--cluster-idle-ms", "3000")
    fronts = start_fronts(cluster, 2, *flags)
    try:
        queues = [f"many{i}" for i in range(QUEUES)]
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            list(pool.map(lambda i: create(fronts[i % 2], queues[i::20]), range(20)))
        with redis.Redis(port=fronts[0].port) as client:
            assert client.zcard("emq:queues") == QUEUES
        until(lambda: all(owned(server) == 0 for server in fronts), 60, "every queue let go")
        rng = random.Random(35)
        sample = rng.sample(queues, 60)
        for queue in sample[:30]:
            claim_within(rng.choice(fronts), queue, 2.0)
        # A front killed and started again (the same address) serves within the lease
        # and 2 s: its queues' leases it took back, or they ran out.
        killed = fronts[0]
        port = killed.port
        killed.kill(signal.SIGKILL)
        started = time.monotonic()
        fronts[0] = start_emqd("--cluster", cluster.seeds, *flags, port=port)
        for queue in sample[30:]:
            claim_within(fronts[0], queue, LEASE_MS / 1000 + 2)
        assert time.monotonic() - started < 60
    finally:
        for server in fronts:
            server.stop()


def owned(server: ServerProcess) -> int:
    with redis.Redis(port=server.port) as client:
        return int(client.info("cluster")["emqd_cluster_queues_owned"])


def test_a_queue_of_a_million_jobs_is_taken_over_and_keeps_its_lease_while_it_loads(
        cluster: Cluster) -> None:
    """The front that takes a queue over renews the lease while it loads (a million jobs
    load for longer than the default lease here and on CI): it takes the queue once and
    serves it. A front that renewed only after its load lost the lease to its own load
    and took the queue again, for ever; one that put the loaded million into its store
    in one go held its loop about two seconds, in which the lease ran out unrenewed
    (taken, let go at the first request, loaded again). The CLAIM that set the take off
    waits for the load (longer than `--cluster-timeout-ms` here): it is not answered
    TRYAGAIN at the timeout. How fast is the benchmark's figure
    (`emqd-bench --scenarios cluster --takeover-jobs 1000000`; issue 35 wants 15 s on a
    quiet machine); the bound here only ends a hang."""
    fronts = start_fronts(cluster, 2)
    try:
        with redis.Redis(port=fronts[0].port) as client:
            client.execute_command("EMQ.ADD", "million", "one")
        owner, other = owner_and_other(fronts, "million")
        with redis.Redis(port=owner.port, socket_timeout=120) as client:
            for start in range(1, 1_000_000, 20_000):  # bounded: fifty pipelines
                pipe = client.pipeline(transaction=False)
                for _ in range(min(20_000, 1_000_000 - start)):
                    pipe.execute_command("EMQ.ADD", "million", PAYLOAD)
                pipe.execute()
            assert client.execute_command("EMQ.STATS", "million")[b"pending"] == 1_000_000
        owner.stop()  # SIGTERM: its lease is let go at once
        claim_within(other, "million", 120.0)
        with redis.Redis(port=other.port) as client:
            assert client.execute_command("EMQ.STATS", "million")[b"pending"] == 999_999
        output = other.output()
        assert output.count("owning queue b'million'") == 1, output[-4000:]
        assert "ran out" not in output and "lost the lease" not in output, output[-4000:]
    finally:
        for server in fronts:
            server.stop()
