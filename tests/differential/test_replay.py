"""The ops emqd logs, fed to a real redis-server, rebuild the same keyspace.

The append-only file holds a plan's ops as Redis commands (protocol 4.3), and
Redis itself must be able to load it. This runs a random session in-process,
sends every logged op to the reference, rendered as the log renders values
(bytes as they are, ints in decimal, floats as repr), then compares each
key's content as both servers answer it, byte for byte.
"""

from __future__ import annotations

import pytest

from emqd import dispatch
from emqd.config import Config
from emqd.core import Core, Session
from emqd.wire.resp import encode
from tests.differential.generate import ALL_KEYS, Generator, render, setup
from tests.differential.harness import parse
from tests.support import RawClient, RecordingLog, plain_value

pytestmark = pytest.mark.redis_reference


@pytest.mark.parametrize("seed", [8, 9])
def test_logged_ops_load_into_redis(redis_ref: int, seed: int) -> None:
    log = RecordingLog()
    state = Core(Config(appendonly=False), sink=log)
    session = Session(state)
    gen = Generator(seed)
    for argv in setup():
        dispatch.execute(session, [render(a) for a in argv])
    for _ in range(800):
        _, argv = gen.zset_command() if gen.rng.random() < 0.6 else gen.hash_command()
        dispatch.execute(session, [render(a) for a in argv])
    assert log.ops
    redis = RawClient(redis_ref)
    try:
        for op in log.ops:
            reply = redis.command(*[render(a) for a in op])
            assert not reply.startswith(b"-"), (op, reply)
        for key in ALL_KEYS:
            for read in ([b"TYPE", key], [b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"],
                         [b"HLEN", key]):
                if read[0] != b"TYPE" and state.keyspace.type_name(key) == "none":
                    continue
                if read[0] == b"ZRANGE" and state.keyspace.type_name(key) != "zset":
                    continue
                mine = encode(dispatch.execute(session, read), 2)
                assert mine == redis.command(*read), read
            if state.keyspace.type_name(key) == "hash":
                mine_row = plain_value(state.keyspace.data[key])[1]
                redis_row = redis.command(b"HGETALL", key)
                assert sorted(mine_row.items()) == sorted(_pairs(redis_row)), key
    finally:
        redis.close()


def _pairs(reply: bytes) -> list[tuple[bytes, bytes]]:
    items = [value for _, value in parse(reply)[1]]
    return list(zip(items[::2], items[1::2], strict=True))
