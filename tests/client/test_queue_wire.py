"""Queue and SyncQueue over a real socket to a real emqd: the same operations, two drivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from redis.exceptions import ResponseError

from emqd.client import Child, Job, JobStateError, Lane, NewJob, Queue, StaleJob, SyncQueue


@pytest.fixture
async def queue(emqd_port: int) -> AsyncIterator[Queue]:
    async with Queue("mail", f"redis://127.0.0.1:{emqd_port}") as q:
        yield q


@pytest.fixture
def sync_queue(emqd_port: int) -> Iterator[SyncQueue]:
    with SyncQueue("mail", f"redis://127.0.0.1:{emqd_port}") as q:
        yield q


async def test_add_get_and_stats(queue: Queue, r: redis.Redis) -> None:
    first = await queue.add(b"hello")
    second = await queue.add_json({"to": "ada"}, priority=-3, max_attempts=5,
                                  backoff="exp:100:2000")
    later = await queue.add("later", delay_ms=60_000)
    assert len({first, second, later}) == 3 and all(len(i) == 32 for i in (first, second, later))
    info = await queue.get(second)
    assert info.state == "pending" and info.json() == {"to": "ada"}
    assert info.number("priority") == -3 and info.number("max_attempts") == 5
    assert info.fields["backoff"] == b"exp:100:2000"
    assert (await queue.get(later)).state == "scheduled"
    assert await queue.get("nope") is None
    stats = await queue.stats()
    assert (stats.pending, stats.scheduled, stats.active, stats.paused) == (2, 1, 0, 0)
    # The client wrote what the protocol says: the row is a plain hash.
    assert r.hget(f"emq:{{mail}}:job:{first}", "payload") == b"hello"


async def test_add_with_an_existing_id_is_idempotent(queue: Queue) -> None:
    assert await queue.add(b"a", id="order-7") == "order-7"
    assert await queue.add(b"b", id="order-7") == "order-7"
    assert (await queue.get("order-7")).payload == b"a"
    assert (await queue.stats()).pending == 1


async def test_add_many_is_one_pipeline_and_reports_errors(queue: Queue) -> None:
    ids = await queue.add_many([b"a", NewJob(b"b", id="bee"), "c", {"to": "ada"}])
    assert ids[1] == "bee" and len(set(ids)) == 4  # the others named by the client
    assert (await queue.get(ids[3])).json() == {"to": "ada"}
    with pytest.raises(ResponseError, match="invalid backoff rule"):
        await queue.add_many([b"x", NewJob(b"y", backoff="sometimes")])
    assert (await queue.stats()).pending == 5  # the valid one before the error went in


def test_settings_queues_lanes_and_promote_over_the_wire(sync_queue: SyncQueue,
                                                         emqd_port: int) -> None:
    mail = sync_queue
    assert mail.get_config()["max_attempts"] == "3"  # the server's default
    mail.set_config(max_attempts=5, backoff="exp:100:60000")
    assert mail.get_config("max_attempts") == "5"
    assert mail.get_config()["backoff"] == "exp:100:60000"
    with pytest.raises(ResponseError, match="unknown field 'colour'"):
        mail.set_config(colour="blue")
    mail.add_many([NewJob(b"r1", group="acme"), NewJob(b"r2", group="acme"), b"flat"])
    mail.add(b"later", delay_ms=60_000)
    with SyncQueue(b"reports", f"redis://127.0.0.1:{emqd_port}") as reports:
        assert reports.name == "reports"
        reports.add(b"r")
        assert mail.queues() == ["mail", "reports"]
    assert mail.lanes() == {"acme": Lane(pending=2, active=0)}
    mail.set_lane_limit("acme", 2)
    assert len(mail.claim(30000, count=10)) == 3  # both acme jobs: its limit is 2 now
    assert mail.lanes() == {"acme": Lane(pending=0, active=2)}
    assert mail.promote() == 0  # the delayed job is not due


def test_a_queue_named_by_bytes_that_are_not_utf8(emqd_port: int, r: redis.Redis) -> None:
    with SyncQueue(b"q\xff", f"redis://127.0.0.1:{emqd_port}") as q:
        job_id = q.add(b"x")
        assert q.stats().pending == 1
        (job,) = q.claim(30000)
        q.complete(job, b"done")
        assert q.get(job_id).result == b"done"
        shown = q.name
        assert q.queues() == [shown] == ["q\udcff"]  # surrogateescape
    assert r.hget(b"emq:{q\xff}:job:" + job_id.encode(), "state") == b"completed"
    # The name as the client shows it opens the same queue, as a flow's child queue too.
    with SyncQueue(shown, f"redis://127.0.0.1:{emqd_port}") as again:
        assert again.stats().completed == 1
        again.flow(b"parent", [Child(shown, b"child")])
        assert again.stats().pending == 1 and again.stats().waiting == 1


async def test_pause_and_resume(queue: Queue) -> None:
    await queue.pause()
    assert (await queue.stats()).paused == 1
    await queue.resume()
    assert (await queue.stats()).paused == 0


def test_sync_queue_has_the_same_methods(sync_queue: SyncQueue) -> None:
    first = sync_queue.add_json([1, 2])
    assert len(sync_queue.add_many([b"a", b"b"])) == 2
    assert sync_queue.get(first).json() == [1, 2]
    assert sync_queue.stats().pending == 3
    with pytest.raises(ResponseError, match="PRIORITY must be between"):
        sync_queue.add(b"x", priority=5000)


def test_default_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQD_URL", "redis://127.0.0.1:1")
    assert SyncQueue("q").url == "redis://127.0.0.1:1"
    assert SyncQueue("q", "redis://127.0.0.1:2").url == "redis://127.0.0.1:2"
    monkeypatch.delenv("EMQD_URL")
    assert SyncQueue("q").url == "redis://127.0.0.1:6390"


async def test_the_holder_verbs_and_their_refusals(queue: Queue) -> None:
    ids = await queue.add_many([b"a", b"b", b"c"], max_attempts=2)
    jobs = await queue.claim(5000, count=3)
    assert [(j.id, j.failures) for j in jobs] == [(job_id, 0) for job_id in ids]
    first, second, third = jobs
    assert await queue.extend(first, 60_000) > 0
    await queue.complete(first, {"ok": True})
    assert (await queue.get(first.id)).result == b'{"ok":true}'
    with pytest.raises(StaleJob, match="job not active"):
        await queue.complete(first)
    with pytest.raises(StaleJob, match="token mismatch"):
        await queue.extend(Job(second.id, b"", second.token + "7"), 1000)
    verdict = await queue.fail(second, "ValueError: x", backoff_ms=0)
    assert (verdict.verdict, verdict.failures, verdict.dead) == ("scheduled", 1, False)
    await queue.requeue(third)
    row = await queue.get(third.id)
    assert (row.state, str(row.attempts), row.failures) == ("pending", third.token, 0)


async def test_dead_letters_browse_revive_and_remove(queue: Queue) -> None:
    await queue.add_many([b"x%d" % n for n in range(5)])
    ids = []
    for job in await queue.claim(5000, count=5):
        verdict = await queue.fail(job, f"boom {job.id}", max_attempts=1)
        assert verdict.dead
        ids.append(job.id)
        await asyncio.sleep(0.002)  # one death a millisecond: the dead set's order
    page = await queue.dead(1, 2)
    assert [(info.id, info.state, info.last_error) for info in page] == [
        (ids[1], "dead", f"boom {ids[1]}"), (ids[2], "dead", f"boom {ids[2]}")]
    assert [info.id for info in await queue.dead()] == ids
    await queue.revive(ids[0], reset=True)
    row = await queue.get(ids[0])
    assert (row.state, row.failures) == ("pending", 0)
    with pytest.raises(JobStateError, match="not dead"):
        await queue.revive(ids[0])
    [claimed] = await queue.claim(5000)
    with pytest.raises(JobStateError, match="is active"):
        await queue.remove(claimed.id)
    assert await queue.remove(ids[4]) is True
    assert await queue.remove(ids[4]) is False
    assert [info.id for info in await queue.dead()] == ids[1:4]


async def test_a_blocking_claim_waits_for_an_add_on_another_connection(queue: Queue) -> None:
    waiting = asyncio.create_task(queue.claim(5000, count=2, block_ms=3000))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    job_id = await queue.add(b"wake")  # a second pooled connection, while one is parked
    jobs = await asyncio.wait_for(waiting, 3)
    assert [job.id for job in jobs] == [job_id]
    assert await queue.claim(100, block_ms=50) == []


async def test_a_job_in_a_lane_is_claimed_and_completed_like_any_other(queue: Queue) -> None:
    job_id = await queue.add(b"per-tenant", group="tenant-1")
    assert (await queue.get(job_id)).fields["group"] == b"tenant-1"
    [job] = await queue.claim(5000, block_ms=1000)
    assert job.id == job_id
    await queue.complete(job)
    assert (await queue.stats()).completed == 1
