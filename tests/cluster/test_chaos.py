"""Chaos over a cluster: producers and consumers through three fronts on three queues
while a front is killed, another is stopped past its leases, and a primary is killed.

At the end, read from the cluster itself: every acknowledged ADD is completed or
dead, no job was completed twice, no (job, token) was handed to two claims, and
protocol section 1's invariant holds in every queue. Every loop is bounded in
count and time.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter

import pytest
import redis
import redis.asyncio as aioredis

from emqd.store import hash as hashes
from emqd.store.keyspace import Keyspace
from tests.cluster.conftest import need_redis
from tests.cluster.support import Cluster, start_fronts
from tests.support import ServerProcess
from tests.verbs.jobs import check_invariant
from tests.verbs.planner import build

QUEUES = [b"c0", b"c1", b"c2"]
PRODUCE_S = 16.0
DRAIN_S = 40.0  # after producing: every acknowledged job done or dead within this
LEASE_MS = 2000


class Ledger:
    """What the clients were told."""

    def __init__(self) -> None:
        self.added: dict[bytes, set[bytes]] = {queue: set() for queue in QUEUES}
        self.claims: Counter[tuple[bytes, bytes, bytes]] = Counter()
        self.completed: Counter[tuple[bytes, bytes]] = Counter()
        self.refusals = 0


class Pool:
    """A client that moves to another front when its front stops answering."""

    def __init__(self, fronts: list[ServerProcess], first: int) -> None:
        self.ports = [server.port for server in fronts]
        self.at = first
        self.client = self._connect()

    def _connect(self) -> aioredis.Redis:
        return aioredis.Redis(port=self.ports[self.at], socket_timeout=12,
                              socket_connect_timeout=1)

    async def run(self, *argv: object) -> object:
        try:
            return await self.client.execute_command(*argv)
        except (redis.ConnectionError, redis.TimeoutError):
            await self.client.aclose()
            self.at = (self.at + 1) % len(self.ports)
            self.client = self._connect()
            raise

    async def close(self) -> None:
        await self.client.aclose()


async def producer(pool: Pool, name: str, ledger: Ledger, stop_at: float) -> None:
    rng = random.Random(name)
    n = 0
    while time.monotonic() < stop_at:
        queue = rng.choice(QUEUES)
        job_id = f"{name}-{n}".encode()
        try:
            reply = await pool.run("EMQ.ADD", queue, b"work", "ID", job_id, "MAXATTEMPTS", 5)
        except redis.RedisError:
            ledger.refusals += 1
            await asyncio.sleep(0.05)
            continue  # the same id again: idempotent
        assert reply == job_id
        ledger.added[queue].add(job_id)
        n += 1
        await asyncio.sleep(0.01)


async def consumer(pool: Pool, name: str, ledger: Ledger, stop_at: float) -> None:
    rng = random.Random(name)
    while time.monotonic() < stop_at:
        queue = rng.choice(QUEUES)
        try:
            got = await pool.run("EMQ.CLAIM", queue, 1500, "BLOCK", 100)
        except redis.RedisError:
            ledger.refusals += 1
            await asyncio.sleep(0.05)
            continue
        if not got:
            continue
        job_id, token = got[0], got[1]
        ledger.claims[(queue, job_id, token)] += 1
        try:
            if await pool.run("EMQ.COMPLETE", queue, job_id, token) == b"OK":
                ledger.completed[(queue, job_id)] += 1
        except redis.RedisError:
            ledger.refusals += 1  # stale (the lease moved on) or not acknowledged


def queue_space(cluster: Cluster, queue: bytes) -> Keyspace:
    """The queue's keys as the cluster holds them, in a keyspace of their own."""
    data: dict[bytes, object] = {}
    prefix = b"emq:{" + queue + b"}:"
    with cluster.client() as store:
        for key in store.scan_iter(match=prefix + b"*", count=1000, target_nodes="primaries"):
            kind = store.type(key)
            if kind == b"hash":
                data[key] = store.hgetall(key)
            elif kind == b"zset":
                data[key] = store.zrange(key, 0, -1, withscores=True)
    return build(data)


@pytest.mark.timeout(150)  # bounded phases that can add up past the suite's 60 s
def test_chaos_through_fronts_with_a_front_killed_one_stopped_and_a_primary_killed() -> None:
    need_redis()
    cluster = Cluster.start()
    fronts: list[ServerProcess] = []
    try:
        fronts = start_fronts(cluster, 3, "--cluster-lease-ms", str(LEASE_MS),
                              "--cluster-timeout-ms", "3000", "--keep-completed", "100000")
        ledger = Ledger()

        async def chaos() -> None:
            start = time.monotonic()
            pools = [Pool(fronts, i % 3) for i in range(6)]
            tasks = [asyncio.create_task(producer(pools[i], f"p{i}", ledger,
                                                  start + PRODUCE_S)) for i in range(3)]
            tasks += [asyncio.create_task(consumer(pools[3 + i], f"c{i}", ledger,
                                                   start + PRODUCE_S + DRAIN_S))
                      for i in range(3)]
            await asyncio.sleep(3)
            fronts[0].kill(signal.SIGKILL)
            await asyncio.sleep(2)
            fronts[1].send_signal(signal.SIGSTOP)
            await asyncio.sleep(LEASE_MS / 1000 + 2)
            fronts[1].send_signal(signal.SIGCONT)
            await asyncio.sleep(1)
            primary = cluster.primary_of(b"emq:{c1}:pending")
            replica = cluster.replica_of(primary)
            primary.kill(signal.SIGKILL)
            await asyncio.to_thread(cluster.promoted, replica)
            await asyncio.to_thread(primary.restart)  # back as its replica's replica
            await asyncio.gather(*tasks[:3])  # producers done
            deadline = time.monotonic() + DRAIN_S
            while time.monotonic() < deadline and not all_done(cluster, ledger):
                await asyncio.sleep(0.5)
            for task in tasks[3:]:
                task.cancel()
            await asyncio.gather(*tasks[3:], return_exceptions=True)
            for pool in pools:
                await pool.close()

        asyncio.run(chaos())
        assert sum(len(ids) for ids in ledger.added.values()) > 100
        assert ledger.refusals > 0  # the chaos was felt
        assert max(ledger.completed.values(), default=1) == 1  # none completed twice
        assert max(ledger.claims.values(), default=1) == 1  # no (job, token) handed out twice
        for queue in QUEUES:
            space = queue_space(cluster, queue)
            check_invariant(space, b"emq:{" + queue + b"}:")
            for job_id in ledger.added[queue]:
                row = space.hash(b"emq:{" + queue + b"}:job:" + job_id)
                assert row is not None, (queue, job_id)
                state = hashes.as_dict(row)[b"state"]
                assert state in (b"completed", b"dead"), (queue, job_id, state)
    finally:
        for server in fronts:
            server.send_signal(signal.SIGCONT)
            server.stop()
        cluster.stop()


def all_done(cluster: Cluster, ledger: Ledger) -> bool:
    """Every acknowledged job completed or dead, as the cluster holds it."""
    with cluster.client() as store:
        for queue, ids in ledger.added.items():
            prefix = b"emq:{" + queue + b"}:"
            done = store.zcard(prefix + b"completed") + store.zcard(prefix + b"dead")
            if done < len(ids):
                return False
    return True
