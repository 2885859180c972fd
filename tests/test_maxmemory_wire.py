"""maxmemory over the wire (issue 24 item 5): past the limit what adds data is refused with
Redis's -OOM and writes nothing, while CLAIM, COMPLETE, FAIL, REMOVE and every read go on,
so a full queue drains; the flag, CONFIG SET/GET, INFO memory and the refusals that
Redis also gives (compared byte for byte with a redis-server over its own limit)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.differential.harness import Pair
from tests.support import RawClient, ServerProcess, start_emqd, start_redis

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
PAYLOAD = b"x" * 10_000
MAX_ADDS = 2_000  # the loop that fills the server stops here whatever happens


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    server = start_emqd("--maxmemory", "1gb")
    yield server
    server.stop()


def _info(client: redis.Redis) -> dict:
    return client.info("memory")  # type: ignore[no-any-return]


def test_the_flag_takes_redis_s_units_and_info_shows_the_limit(server: ServerProcess) -> None:
    with redis.Redis(port=server.port) as client:
        assert client.config_get("maxmemory") == {"maxmemory": str(1024**3)}
        info = _info(client)
        assert (info["maxmemory"], info["maxmemory_human"], info["maxmemory_policy"]) == \
            (1024**3, "1.00G", "noeviction")
        assert info["used_memory"] == info["used_memory_startup"] + info["used_memory_dataset"] \
            + (info["used_memory_overhead"] - info["used_memory_startup"])
        client.config_set("maxmemory", "64mb")
        assert _info(client)["maxmemory"] == 64 * 1024**2
        with pytest.raises(redis.ResponseError, match="never evicts: allkeys-lru is not "
                                                      "supported, only noeviction"):
            client.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(redis.ResponseError, match="must be one of the following"):
            client.config_set("maxmemory-policy", "sometimes")
        with pytest.raises(redis.ResponseError, match="argument must be a memory value"):
            client.config_set("maxmemory", "lots")
        client.config_set("maxmemory-policy", "NOEVICTION")
        assert client.config_get("maxmemory*") == {"maxmemory": str(64 * 1024**2),
                                                    "maxmemory-policy": "noeviction"}


def _fill(raw: RawClient) -> list[bytes]:
    """ADD until the limit refuses one; the ids added."""
    ids: list[bytes] = []
    for _ in range(MAX_ADDS):
        reply = raw.command("EMQ.ADD", "q", PAYLOAD)
        if reply == OOM:
            return ids
        assert reply.startswith(b"$"), reply
        ids.append(reply.split(b"\r\n")[1])
    pytest.fail(f"no OOM after {MAX_ADDS} ADDs")


def test_past_the_limit_growth_is_refused_and_a_full_queue_drains(server: ServerProcess) -> None:
    raw = RawClient(server.port)
    client = redis.Redis(port=server.port)
    try:
        used = _info(client)["used_memory"]
        client.config_set("maxmemory", str(used + 300_000))
        ids = _fill(raw)
        assert 10 <= len(ids) <= 60  # about 300 kB of 10 kB payloads
        before = (client.dbsize(), client.execute_command("EMQ.STATS", "q"), _info(client))
        for argv in (("EMQ.ADD", "q", "more"), ("HSET", "h", "f", "v"), ("ZADD", "z", "1", "m"),
                     ("HSETNX", "h", "f", "v"), ("HINCRBY", "h", "f", "1"),
                     ("EMQ.REPEAT", "q", "r", "EVERY", "1000", "p"),
                     ("EMQ.FLOW", "q", "parent", "CHILDREN", "1", "q", "child")):
            assert raw.command(*argv) == OOM, argv
        # a transaction: what is queued is refused, and the EXEC that follows aborts
        assert raw.command("MULTI") == b"+OK\r\n"
        assert raw.command("HGET", "h", "f") == OOM
        assert raw.command("EXEC").startswith(b"-EXECABORT")
        after = (client.dbsize(), client.execute_command("EMQ.STATS", "q"), _info(client))
        assert after[:2] == before[:2]
        assert after[2]["used_memory_dataset"] == before[2]["used_memory_dataset"]
        # the workers go on: reads, CLAIM, COMPLETE, FAIL, REMOVE
        assert client.execute_command("EMQ.GET", "q", ids[0])
        assert raw.command("MEMORY", "USAGE", b"emq:{q}:job:" + ids[0]).startswith(b":")
        claimed = client.execute_command("EMQ.CLAIM", "q", "30000", "COUNT", "2")
        assert len(claimed) == 2
        (first_id, first_token), (second_id, second_token) = [
            (job[0], job[1]) for job in claimed]
        assert client.execute_command("EMQ.COMPLETE", "q", first_id, first_token) is not None
        assert client.execute_command("EMQ.FAIL", "q", second_id, second_token,
                                      "ERROR", "e") is not None
        for job_id in ids[2:]:
            client.execute_command("EMQ.REMOVE", "q", job_id)
        # room again: growth is accepted
        assert raw.command("EMQ.ADD", "q", "small").startswith(b"$")
        assert raw.command("HSET", "h", "f", "v") == b":1\r\n"
    finally:
        raw.close()
        client.close()


@pytest.mark.redis_reference
@pytest.mark.parametrize("resp", [2, 3])
def test_the_refusals_are_redis_s(resp: int) -> None:
    emqd = start_emqd("--maxmemory", "1")
    try:
        reference = start_redis("--maxmemory", "1")
    except BaseException:
        emqd.stop()
        raise
    pair = Pair(emqd.port, reference.port, resp, "oom")
    try:
        for argv in (("HSET", "h", "f", "v"), ("ZADD", "z", "1", "m"), ("HGET", "h", "f"),
                     ("ZRANGE", "z", "0", "-1"), ("DEL", "h"), ("MULTI",), ("HGET", "h", "f"),
                     ("HSET", "h", "f", "v"), ("EXEC",), ("MULTI",), ("DISCARD",),
                     ("CONFIG", "GET", "maxmemory"), ("PING",)):
            pair.same(*argv)
    finally:
        pair.close()
        emqd.stop()
        reference.stop()
