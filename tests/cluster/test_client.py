"""The Python client over two fronts of one real cluster: it learns the fronts (EMQ.FRONTS)
and sends a queue's requests to its owner, whichever front it was given.

Where the requests went is read from the fronts themselves, not from timings: every
request a front receives counts in its INFO `total_commands_processed` (also one it
forwards), and the Worker's connections carry its name in CLIENT LIST. A front that
forwarded the client's requests would have counted each of them.
(A front killed under a Worker: test_client_failover.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
import redis

from emqd.client import Job, Queue, SyncQueue, Worker
from tests.cluster.support import (
    Cluster,
    fronts_live,
    name_for,
    owner_and_other,
    start_fronts,
    until,
)
from tests.cluster.support import front as start_front
from tests.support import ServerProcess

LEASE_MS = 2000
JOBS = 200
# Requests a front that forwards nothing counts meanwhile: the queue's connection's login
# (redis-py's CLIENT SETINFOs), its probe (EMQ.FRONTS, EMQ.OWNER), the test's INFO and
# CLIENT LIST.
LOOKS = 10


@pytest.fixture(scope="module")
def fronts(cluster: Cluster) -> Iterator[list[ServerProcess]]:
    started = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    yield started
    for server in started:
        server.stop()


def url(server: ServerProcess) -> str:
    return f"redis://127.0.0.1:{server.port}"


def address(server: ServerProcess) -> bytes:
    return f"127.0.0.1:{server.port}".encode()


class Counted:
    """The requests a front received so far, read on one connection of the test's own (so
    that each reading adds one: its INFO)."""

    def __init__(self, server: ServerProcess) -> None:
        self.client = redis.Redis(port=server.port)

    def __call__(self) -> int:
        return int(self.client.info("stats")["total_commands_processed"])

    def workers(self) -> int:
        """The connections named as a Worker names its own (CLIENT LIST)."""
        return sum(entry["name"].startswith("emqd-worker?")
                   for entry in self.client.client_list())


@pytest.fixture
def counted(fronts: list[ServerProcess]) -> Iterator[dict[int, Counted]]:
    """Each front's `Counted`, by its port."""
    counters = {server.port: Counted(server) for server in fronts}
    yield counters
    for counter in counters.values():
        counter.client.close()


def owned(fronts: list[ServerProcess], prefix: str) -> tuple[str, ServerProcess, ServerProcess]:
    """A queue of its own with a job in it (so that a front owns it), its owner, the other."""
    name = name_for(fronts, prefix)
    with redis.Redis(port=fronts[0].port) as client:
        client.execute_command("EMQ.ADD", name, "first")
    owner, other = owner_and_other(fronts, name)
    return name, owner, other


def test_emq_fronts_lists_the_live_fronts_each_one_itself_first(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    for server, them in ((fronts[0], fronts[1]), (fronts[1], fronts[0])):
        with redis.Redis(port=server.port) as client:
            assert client.execute_command("EMQ.FRONTS") == [address(server), address(them)]
    third = start_front(cluster, "--cluster-lease-ms", str(LEASE_MS))
    try:
        until(lambda: fronts_live(third) == 3, 10, "the third front sees the others")
        with redis.Redis(port=third.port) as client:
            listed = client.execute_command("EMQ.FRONTS")
        assert listed[0] == address(third)
        assert sorted(listed[1:]) == sorted([address(fronts[0]), address(fronts[1])])
    finally:
        third.stop()  # SIGTERM: it leaves the registry at once

    def without_it() -> bool:
        with redis.Redis(port=fronts[0].port) as client:
            return address(third) not in client.execute_command("EMQ.FRONTS")
    until(without_it, 10, "the stopped front no longer listed")


def test_a_sync_queue_given_the_other_front_sends_to_the_owner(
        fronts: list[ServerProcess], counted: dict[int, Counted]) -> None:
    name, owner, other = owned(fronts, "produced")
    before = counted[owner.port](), counted[other.port]()
    with SyncQueue(name, url(other)) as queue:
        for n in range(JOBS):
            queue.add(b"job %d" % n)
        assert queue.stats().pending == JOBS + 1
    assert counted[owner.port]() - before[0] >= JOBS
    assert counted[other.port]() - before[1] <= LOOKS


async def test_a_queue_given_a_url_list_sends_to_the_owner(
        fronts: list[ServerProcess], counted: dict[int, Counted]) -> None:
    """`redis://a,b` names both fronts; given the other one first, the queue still goes to
    the owner (it is told so by the first it asks)."""
    name, owner, other = owned(fronts, "listed")
    before = counted[owner.port](), counted[other.port]()
    both = f"redis://127.0.0.1:{other.port},127.0.0.1:{owner.port}"
    async with Queue(name, both) as queue:
        for n in range(JOBS):
            await queue.add(b"job %d" % n)
        assert (await queue.stats()).pending == JOBS + 1
    assert counted[owner.port]() - before[0] >= JOBS
    assert counted[other.port]() - before[1] <= LOOKS


async def test_a_worker_given_the_other_front_works_at_the_owner(
        fronts: list[ServerProcess], counted: dict[int, Counted]) -> None:
    name, owner, other = owned(fronts, "worked")
    with SyncQueue(name, url(owner)) as producer:
        producer.add_many([b"job %d" % n for n in range(JOBS)])
    done: list[str] = []
    before = counted[other.port]()

    async def handler(job: Job) -> None:
        done.append(job.id)
        await asyncio.sleep(0.002)

    queue = Queue(name, url(other))
    worker = Worker(queue, handler, concurrency=10, lease_ms=10_000, block_ms=200)
    running = asyncio.ensure_future(worker.run())
    try:
        await asyncio.wait_for(_until(lambda: worker.counts.completed >= JOBS + 1), 30)
        assert counted[owner.port].workers() == 2 and counted[other.port].workers() == 0
    finally:
        worker.stop()
        await asyncio.wait_for(running, 15)
        await queue.aclose()
    assert sorted(done) == sorted(set(done)) and len(done) == JOBS + 1
    assert counted[other.port]() - before <= LOOKS  # no claim, no COMPLETE went through it


async def _until(condition: Callable[[], bool], pause: float = 0.02) -> None:
    """Wait for `condition` (the caller bounds the wait: asyncio.wait_for)."""
    while not condition():
        await asyncio.sleep(pause)


async def test_events_given_the_other_front_are_followed_at_the_owner(
        fronts: list[ServerProcess], counted: dict[int, Counted]) -> None:
    """The owner publishes a queue's events, so `events()` subscribes there."""
    name, owner, other = owned(fronts, "followed")
    channel = f"emq:{{{name}}}:events"
    async with Queue(name, url(other)) as queue:
        events = queue.events()
        first = asyncio.ensure_future(events.__anext__())
        try:
            await asyncio.wait_for(_until(
                lambda: counted[owner.port].client.pubsub_numsub(channel)[0][1] == 1), 10)
            assert counted[other.port].client.pubsub_numsub(channel)[0][1] == 0
            job_id = await queue.add(b"watched")
            event = await asyncio.wait_for(first, 10)
            assert (event.name, event.id) == ("added", job_id)
        finally:
            first.cancel()
            await events.aclose()
