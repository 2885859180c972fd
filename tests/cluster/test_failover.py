"""A primary killed under load: no acknowledged job is lost, nothing unacknowledged is OK.

A cluster of its own (3 primaries, a replica each, node timeout 2 s), one front
with `--cluster-acks 1`. Producers add jobs with ids of their own (an ADD
retried with the same id is idempotent), then the primary of the queue's slot
is killed with SIGKILL. Its replica takes over within seconds; meanwhile, and
while the shard has no replica to acknowledge, writes are answered TRYAGAIN,
never OK. Once the killed node comes back (as the new primary's replica),
writes are acknowledged again. At the end every ADD that was answered with its
id is in the cluster.

The node comes back only once a writer was refused (or after OUTAGE_S) and its
replica was promoted: when the failover happens is the cluster's business, a
restart that came before the front's timeout would leave nothing unacknowledged
to check, and one that came before the promotion would bring the shard back
with the restarted node's empty dataset (these nodes keep nothing on disk).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import TryAgainError

from tests.cluster.conftest import need_redis
from tests.cluster.support import Cluster, front, until
from tests.support import ServerProcess

KILL_AT_S = 3.0  # producing before the kill
OUTAGE_S = 20.0  # at most, until a writer is refused
AFTER_S = 4.0  # producing after the killed node is back
PRODUCERS = 4


async def produce(port: int, name: str, acked: set[bytes], refused: list[str],
                  stop: asyncio.Event) -> None:
    """Add jobs `name-0`, `name-1`, ... until `stop` is set; each retried until answered."""
    client = aioredis.Redis(port=port, socket_timeout=15)
    try:
        n = 0
        while not stop.is_set():
            job_id = f"{name}-{n}".encode()
            try:
                reply = await client.execute_command("EMQ.ADD", "load", b"payload", "ID", job_id)
            except redis.RedisError as exc:  # TRYAGAIN, or the front's connection
                refused.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
                continue  # the same id again: idempotent
            assert reply == job_id
            acked.add(job_id)
            n += 1
    finally:
        await client.aclose()


@contextmanager
def cluster_and_front(*flags: str) -> Iterator[tuple[Cluster, ServerProcess]]:
    """A cluster of its own (3 primaries, a replica each) and one front with `flags`;
    both stopped by PID at the end, the cluster also when the front fails to start."""
    need_redis()
    cluster = Cluster.start()
    server: ServerProcess | None = None
    try:
        server = front(cluster, *flags)
        yield cluster, server
    finally:
        if server is not None:
            server.stop()
        cluster.stop()


@pytest.mark.timeout(120)  # bounded phases that can add up past the suite's 60 s
def test_no_acknowledged_job_is_lost_when_a_primary_is_killed() -> None:
    with cluster_and_front("--cluster-acks", "1", "--cluster-lease-ms", "2000",
                           "--cluster-timeout-ms", "3000") as (cluster, server):
        primary = cluster.primary_of(b"emq:{load}:pending")
        replica = cluster.replica_of(primary)
        acked: set[bytes] = set()
        refused: list[str] = []

        async def load() -> None:
            stop = asyncio.Event()
            producers = [asyncio.create_task(produce(server.port, f"p{i}", acked, refused,
                                                     stop)) for i in range(PRODUCERS)]
            try:
                await asyncio.sleep(KILL_AT_S)
                assert acked, "nothing was acknowledged before the kill"
                primary.kill()  # SIGKILL
                # its replica takes the slot over, with no replica of its own to
                # acknowledge: the front's timeout refuses the writers
                deadline = time.monotonic() + OUTAGE_S
                while not refused and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.to_thread(cluster.promoted, replica)
                # back, as the new primary's replica
                await asyncio.to_thread(primary.restart)
                await asyncio.sleep(AFTER_S)
            finally:
                stop.set()
                await asyncio.gather(*producers)

        asyncio.run(load())
        assert refused, f"the outage refused nothing in {OUTAGE_S}s:\n{server.output()[-3000:]}"
        assert any(text.startswith("TryAgainError") for text in refused), set(refused)
        with cluster.client() as store:
            held = set(store.zrange("emq:{load}:pending", 0, -1))
            lost = acked - held
            assert not lost, (f"{len(lost)} of {len(acked)} acknowledged ADDs lost, "
                              f"e.g. {sorted(lost)[:5]}:\n{server.output()[-3000:]}")
            assert store.zcard("emq:{load}:pending") == len(held)
        # acknowledged again once the shard has a replica
        until(lambda: redis.Redis(port=server.port).execute_command(
            "EMQ.ADD", "load", "after", "ID", "after") == b"after", 20, "writes acked again")


@pytest.mark.timeout(90)  # bounded phases that can add up past the suite's 60 s
def test_a_lease_does_not_run_out_for_the_time_a_failover_held_its_claim() -> None:
    """A CLAIM with a 1 s lease sent just after the queue's primary is killed is answered
    only once the replica took over (seconds later: `--cluster-acks 0` and a timeout
    longer than the failover). The store could not be written meanwhile, so that time is
    not the worker's: the sweep did not take the job back, its COMPLETE is OK, and the row
    counts no stall."""
    with cluster_and_front("--cluster-acks", "0", "--cluster-lease-ms", "30000",
                           "--cluster-timeout-ms", "30000") as (cluster, server):
        client = redis.Redis(port=server.port, socket_timeout=40)
        job = client.execute_command("EMQ.ADD", "held", "payload")
        primary = cluster.primary_of(b"emq:{held}:pending")
        primary.kill()  # SIGKILL
        started = time.monotonic()
        claimed = client.execute_command("EMQ.CLAIM", "held", "1000")
        held_s = time.monotonic() - started
        assert held_s > 1.5, f"the CLAIM was answered after {held_s:.1f}s, within its lease"
        assert claimed[:2] == [job, b"1"]
        assert client.execute_command("EMQ.COMPLETE", "held", job, claimed[1]) == b"OK"
        with cluster.client() as store:
            assert store.hget(b"emq:{held}:job:" + job, "state") == b"completed"
            assert store.hget(b"emq:{held}:job:" + job, "stalled") in (None, b"0")


@pytest.mark.timeout(90)  # bounded phases that can add up past the suite's 60 s
def test_a_primary_that_stops_answering_is_given_up_on_not_waited_for() -> None:
    """SIGSTOP of the queue's primary: its connections stay open and nothing answers, as
    with a host gone from the network. The front gives the pipeline up after the write
    timeout (and a WAIT's), retries on the slot's primary of the moment, and answers
    the writer, TRYAGAIN or (once the replica took over) OK, within seconds, where it
    would have waited until the node woke. A queue on another primary keeps its lease
    meanwhile: the silent node's renewal does not hold the others'."""
    with cluster_and_front("--cluster-acks", "0", "--cluster-timeout-ms", "1500",
                           "--cluster-lease-ms", "2000") as (cluster, server):
        client = redis.Redis(port=server.port, socket_timeout=40)
        assert client.execute_command("EMQ.ADD", "mute", "before") == b"1"
        primary = cluster.primary_of(b"emq:{mute}:pending")
        other = next(name for name in (f"other{i}" for i in range(100))
                     if cluster.primary_of(f"emq:{{{name}}}:pending".encode()) is not primary)
        assert client.execute_command("EMQ.ADD", other, "x") == b"1"
        os.kill(primary.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            try:
                reply = client.execute_command("EMQ.ADD", "mute", "during")
            except TryAgainError:
                reply = None
            took = time.monotonic() - started
            time.sleep(max(0.0, 3.0 - took))  # past the lease, the node still stopped
            assert client.execute_command("EMQ.ADD", other, "y") == b"2"
        finally:
            os.kill(primary.proc.pid, signal.SIGCONT)
        assert took < 20, f"the ADD was answered after {took:.1f}s"
        assert reply in (None, b"2"), reply
        assert f"the lease on {other.encode()!r} ran out" not in server.output()
