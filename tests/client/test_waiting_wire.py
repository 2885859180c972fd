"""Issue 13 through the client against a real emqd: a producer that waits for its result,
a handler that reports progress and log lines, the worker's hooks, and `Queue.events()`
with its reconnect."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from emqd.client import Finished, Job, JobDead, Queue, QueueEvent, SyncQueue, WaitTimeout, Worker
from emqd.client.errors import TRANSPORT_ERRORS
from tests.support import start_emqd


@pytest.fixture
async def queue(emqd_port: int) -> AsyncIterator[Queue]:
    async with Queue("rpc", f"redis://127.0.0.1:{emqd_port}") as q:
        yield q


@contextlib.asynccontextmanager
async def working(worker: Worker) -> AsyncIterator[Worker]:
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)


async def handler(job: Job) -> Any:
    request = job.json()
    await job.progress(50)
    await job.log(f"adding {request['a']} and {request['b']}")
    if request["a"] < 0:
        raise ValueError("negative")
    return {"sum": request["a"] + request["b"]}


async def test_request_response_over_the_queue(queue: Queue, emqd_port: int) -> None:
    heard: list[tuple[str, Any]] = []
    worker = Worker(Queue("rpc", f"redis://127.0.0.1:{emqd_port}"), handler, block_ms=50,
                    on_completed=lambda job, result: heard.append((job.id, result)),
                    on_failed=lambda job, error: heard.append((job.id, repr(error))))
    async with working(worker):
        result = await asyncio.wait_for(
            queue.add_and_wait({"a": 2, "b": 3}, timeout_ms=5000), 10)
        assert result == b'{"sum":5}'
        with pytest.raises(JobDead) as dead:
            await queue.add_and_wait({"a": -1, "b": 0}, timeout_ms=5000, max_attempts=1)
        assert dead.value.error == "ValueError: negative"
    await worker.queue.aclose()
    first = heard[0][0]
    assert heard == [(first, {"sum": 5}), (dead.value.job_id, "ValueError('negative')")]
    info = await queue.get(first)
    assert info.fields["progress"] == b"50"
    assert await queue.logs(first) == ["adding 2 and 3"]
    assert await queue.wait(first, 0) == Finished(first, "completed", result=b'{"sum":5}')


async def test_wait_times_out_and_sync_queue_waits_too(queue: Queue, emqd_port: int) -> None:
    job_id = await queue.add(b"nobody works here")
    assert await queue.wait(job_id, 50) is None
    with pytest.raises(WaitTimeout):
        await queue.add_and_wait(b"x", timeout_ms=50)
    with SyncQueue("rpc", f"redis://127.0.0.1:{emqd_port}") as sync_queue:
        (job,) = sync_queue.claim(30000)
        sync_queue.progress(job, "9 of 10")
        assert sync_queue.log(job, "almost") == 1
        sync_queue.complete(job, b"ok")
        assert sync_queue.wait(job_id) == Finished(job_id, "completed", result=b"ok")
        assert sync_queue.logs(job_id) == ["almost"]


async def _next_events(events: AsyncIterator[QueueEvent], n: int) -> list[QueueEvent]:
    return [await asyncio.wait_for(events.__anext__(), 5) for _ in range(n)]


async def _subscribed(port: int, channel: bytes) -> None:
    async with Queue("rpc", f"redis://127.0.0.1:{port}") as probe:
        for _ in range(500):
            if await probe.client.pubsub_numsub(channel) == [(channel, 1)]:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the events iterator never subscribed")


async def test_events_are_parsed_and_survive_a_server_restart(tmp_path: Any) -> None:
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    url = f"redis://127.0.0.1:{server.port}"
    try:
        async with Queue("rpc", url) as producer, Queue("rpc", url) as listener:
            events = listener.events()
            first = asyncio.ensure_future(_next_events(events, 2))
            await _subscribed(server.port, producer.commands.events_channel)
            job_id = await producer.add(b"one")
            [job] = await producer.claim(30000)
            added, claimed = await first
            assert (added.name, added.id, claimed.name, claimed.fields["token"]) == (
                "added", job_id, "claimed", job.token)
            assert isinstance(added.ts, int)
            server.stop()
            server = start_emqd("--appendonly", "yes", dir=str(tmp_path), port=server.port)
            again = asyncio.ensure_future(_next_events(events, 2))
            await _subscribed(server.port, producer.commands.events_channel)
            with contextlib.suppress(*TRANSPORT_ERRORS):  # its pooled connection died
                await producer.ping()
            await producer.complete(job, b"r")
            await producer.pause()
            completed, paused = await again
            assert (completed.name, completed.id, paused.name, paused.id) == (
                "completed", job_id, "paused", None)
            await events.aclose()  # type: ignore[attr-defined]
    finally:
        server.stop()
