"""Queue and SyncQueue over a real socket to a real emqd: the same operations, two drivers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from redis.exceptions import ResponseError

from emqd.client import Queue, SyncQueue


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
    assert (first, second, later) == ("1", "2", "3")
    info = await queue.get(second)
    assert info.state == "pending" and info.json() == {"to": "ada"}
    assert info.number("priority") == -3 and info.number("max_attempts") == 5
    assert info.fields["backoff"] == b"exp:100:2000"
    assert (await queue.get(later)).state == "scheduled"
    assert await queue.get("nope") is None
    stats = await queue.stats()
    assert (stats.pending, stats.scheduled, stats.active, stats.paused) == (2, 1, 0, 0)
    # The client wrote what the protocol says: the row is a plain hash.
    assert r.hget("emq:{mail}:job:1", "payload") == b"hello"


async def test_add_with_an_existing_id_is_idempotent(queue: Queue) -> None:
    assert await queue.add(b"a", id="order-7") == "order-7"
    assert await queue.add(b"b", id="order-7") == "order-7"
    assert (await queue.get("order-7")).payload == b"a"
    assert (await queue.stats()).pending == 1


async def test_add_many_is_one_pipeline_and_reports_errors(queue: Queue) -> None:
    ids = await queue.add_many([b"a", {"payload": b"b", "id": "bee"}, "c"])
    assert ids[:2] == ["1", "bee"] and ids[2].isdigit()
    with pytest.raises(ResponseError, match="invalid backoff rule"):
        await queue.add_many([b"x", {"payload": b"y", "backoff": "sometimes"}])
    assert (await queue.stats()).pending == 4  # the valid one before the error went in


async def test_pause_and_resume(queue: Queue) -> None:
    await queue.pause()
    assert (await queue.stats()).paused == 1
    await queue.resume()
    assert (await queue.stats()).paused == 0


def test_sync_queue_has_the_same_methods(sync_queue: SyncQueue) -> None:
    assert sync_queue.add_json([1, 2]) == "1"
    assert sync_queue.add_many([b"a", b"b"]) == ["2", "3"]
    assert sync_queue.get("1").json() == [1, 2]
    assert sync_queue.stats().pending == 3
    with pytest.raises(ResponseError, match="PRIORITY must be between"):
        sync_queue.add(b"x", priority=5000)


def test_default_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQD_URL", "redis://127.0.0.1:1")
    assert SyncQueue("q").url == "redis://127.0.0.1:1"
    assert SyncQueue("q", "redis://127.0.0.1:2").url == "redis://127.0.0.1:2"
    monkeypatch.delenv("EMQD_URL")
    assert SyncQueue("q").url == "redis://127.0.0.1:6390"
