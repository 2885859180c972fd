"""The benchmark's Lua scripts write what emqd's verbs write.

The side-by-side figures mean something only if both servers do the same
work. Each step of a job's life is sent to emqd as a verb and to
redis-server as EVALSHA of emqd/bench/lua/*.lua, through the benchmark's own targets;
the replies must match, and so must every job row, set and counter, with
only the wall-clock fields (times, time-based scores) and the epoch masked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from emqd.bench.client import Client
from emqd.bench.targets import EmqdTarget, LuaTarget, Target
from emqd.layout import QUEUES, queue_keys
from tests.support import ServerProcess, start_emqd

Q = b"q"
K = queue_keys(Q)
TIMES = {b"created_ms", b"claimed_ms", b"finished_ms", b"lease_epoch", b"ready_ms"}
TIME_SCORED = (K.active, K.scheduled, K.dead, K.completed, QUEUES)
KEYS = (*[K.job(b"%d" % n) for n in (1, 2, 3, 4)], K.pending, K.active, K.scheduled, K.dead,
        K.completed, K.meta, K.config, K.metrics_completed, K.metrics_failed, QUEUES)


@pytest.fixture(scope="module")
def quiet_emqd() -> Iterator[ServerProcess]:
    """No stall sweep of its own: the test sends STALLED.CHECK itself, as the bench does."""
    server = start_emqd("--stalled-interval", "0")
    yield server
    server.stop()


class Pair:
    """The same steps on both servers; each step's two replies."""

    def __init__(self, emqd: Target, redis: Target, clients: dict[str, Client]) -> None:
        self.targets = {"emqd": emqd, "redis": redis}
        self.clients = clients

    async def both(self, step: str, *args: object) -> tuple[object, object]:
        replies = []
        for name, target in self.targets.items():
            request = getattr(target, step)(Q, *args)
            replies.append((await self.clients[name].pipeline([request]))[0])
        return replies[0], replies[1]

    async def same(self, step: str, *args: object) -> object:
        emqd, redis = await self.both(step, *args)
        assert _plain(emqd) == _plain(redis), (step, args)
        return emqd

    async def state(self, name: str) -> dict:
        client = self.clients[name]
        out: dict = {}
        for key in KEYS:
            kind = await client.call(b"TYPE", key)
            if kind == b"hash":
                row = await client.call(b"HGETALL", key)
                pairs = dict(zip(row[::2], row[1::2], strict=True))
                out[key] = {f: (b"<t>" if f in TIMES else v) for f, v in pairs.items()}
            elif kind == b"zset":
                flat = await client.call(b"ZRANGE", key, 0, -1, b"WITHSCORES")
                timed = key in TIME_SCORED
                out[key] = [(m, b"<t>" if timed else s) for m, s in zip(flat[::2], flat[1::2],
                                                                          strict=True)]
        return out


def _plain(reply: object) -> object:
    """Errors compared by text."""
    if isinstance(reply, Exception):
        return ("error", str(reply))
    if isinstance(reply, list):
        return [_plain(r) for r in reply]
    return reply


@pytest.fixture
async def pair(quiet_emqd: ServerProcess, redis_ref: int):  # type: ignore[no-untyped-def]
    class At:  # the targets need only a port
        def __init__(self, port: int) -> None:
            self.port = port

    clients = {"emqd": await Client.connect(quiet_emqd.port),
               "redis": await Client.connect(redis_ref)}
    await clients["emqd"].call(b"FLUSHALL")
    emqd, redis = EmqdTarget(At(quiet_emqd.port)), LuaTarget(At(redis_ref))  # type: ignore[arg-type]
    await redis.prepare(clients["redis"])
    yield Pair(emqd, redis, clients)
    for client in clients.values():
        client.close()


async def test_scripts_leave_the_keyspace_the_verbs_leave(pair: Pair) -> None:
    for n in range(3):
        await pair.same("add", b"payload-%d" % n)
    first = await pair.same("claim", 30_000)
    assert first[:2] == [b"1", b"1"]
    await pair.same("complete", b"1", b"2")  # token mismatch, the same error text
    assert await pair.same("complete", b"1", b"1") == b"OK"
    await pair.same("complete", b"1", b"1")  # job not active any more

    # FAIL with backoff 0 until dead: the cap (3) is on failures.
    for attempt in (1, 2, 3):
        job = await pair.same("claim", 30_000)
        assert job[0] == b"2" and job[1] == b"%d" % attempt
        verdict = await pair.same("fail", b"2", job[1], 0)
        assert verdict == ([b"scheduled", attempt] if attempt < 3 else [b"dead", 3])
        if attempt < 3:
            # emqd promotes due jobs by itself within 10 ms; the scripts need
            # the client's PROMOTE. Counts differ, the keyspaces must not.
            await asyncio.sleep(0.05)
            await pair.both("promote", 100)

    # An expired lease recovered (counted) by the stall sweep.
    job = await pair.same("claim", 1)
    assert job[0] == b"3"
    await asyncio.sleep(0.02)
    assert await pair.same("stalled_check", 100) == [[b"3"], []]

    emqd, redis = await pair.state("emqd"), await pair.state("redis")
    assert emqd == redis
    assert set(emqd) == set(KEYS) - {K.job(b"4"), K.config, K.active, K.scheduled}  # empty
    assert emqd[K.job(b"2")][b"state"] == b"dead" and emqd[K.job(b"3")][b"stalled"] == b"1"
