"""The client's flows, schedules, rate limits and unique jobs against a real emqd; a Worker
runs a flow, the parent's handler reading its children's results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from emqd.client import Added, Child, Job, Queue, SyncQueue, Worker


@pytest.fixture
async def queue(emqd_port: int) -> AsyncIterator[Queue]:
    async with Queue("report", f"redis://127.0.0.1:{emqd_port}") as q:
        yield q


async def test_a_worker_runs_a_flow_parent_last_with_its_childrens_results(
        queue: Queue, emqd_port: int) -> None:
    url = f"redis://127.0.0.1:{emqd_port}"
    flow = await queue.flow({"title": "sum"}, [Child("numbers", json.dumps(n)) for n in (1, 2, 3)])
    assert len(flow.children) == 3
    ran: list[str] = []
    async with Queue("numbers", url) as numbers:

        async def square(job: Job) -> str:
            ran.append("child")
            return str(job.json() ** 2)

        async def total(job: Job) -> str:
            ran.append("parent")
            children = await queue.children(job.id)
            assert children is not None and all(c.state == "completed" for c in children)
            return str(sum(int(c.result or b"0") for c in children))

        workers = [Worker(numbers, square, block_ms=50), Worker(queue, total, block_ms=50)]
        tasks = [asyncio.create_task(w.run()) for w in workers]
        try:
            for _ in range(100):
                info = await queue.get(flow.parent)
                if info is not None and info.state == "completed":
                    break
                await asyncio.sleep(0.05)
        finally:
            for w in workers:
                w.stop()
            await asyncio.gather(*tasks)
    assert (await queue.get(flow.parent)).result == b"14"
    assert ran == ["child"] * 3 + ["parent"]


def test_sync_queue_schedules_rates_and_unique(emqd_port: int) -> None:
    with SyncQueue("mail", f"redis://127.0.0.1:{emqd_port}") as mail:
        first = mail.repeat("digest", b"weekly", cron="0 8 * * 1", tz="Europe/Paris",
                            priority=3)
        [schedule] = mail.repeats()
        assert (schedule.name, schedule.next_ms, schedule.cron, schedule.tz) == (
            "digest", first, "0 8 * * 1", "Europe/Paris")
        assert schedule.options == {"priority": "3"}
        assert mail.delete_repeat("digest") and mail.repeats() == []
        added = mail.add_unique(b"hi", "ada")
        assert added.added and mail.add_unique(b"hi", "ada") == Added(added.id, False, "exists")
        mail.add_many([b"a", b"b", b"c"])
        mail.set_rate(2, 60_000)
        assert len(mail.claim(1000, count=10)) == 2
        assert mail.claim(1000, count=10) == []
        mail.clear_rate()
        assert len(mail.claim(1000, count=10)) == 2
        mail.set_lane_rate("g", 1, 1000)
        mail.clear_lane_rate("g")
        assert mail.stats().waiting == 0
