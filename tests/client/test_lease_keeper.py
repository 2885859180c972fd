"""The lease keeper (emqd/client/lease_keeper.py) against a real emqd: a round extends exactly the
jobs the worker's connections hold, not past the worker's timeout; the process
ends with its pipe, and goes where the worker's connections went."""

from __future__ import annotations

import time

import redis

from emqd.client.lease_keeper import Keeper, _Client, keep_once
from tests.support import free_port


def test_a_round_extends_only_what_the_worker_holds_within_its_timeout(emqd_port: int) -> None:
    ours, theirs, admin = (redis.Redis(port=emqd_port) for _ in range(3))
    ours.client_setname("emqd-worker?host=a")
    theirs.client_setname("emqd-worker?host=b")
    for n in range(4):
        admin.execute_command("EMQ.ADD", "kept", f"p{n}")
    mine = [ours.execute_command("EMQ.CLAIM", "kept", 1000)[0] for _ in range(2)]
    other = theirs.execute_command("EMQ.CLAIM", "kept", 1000)[0]
    admin.execute_command("EMQ.CLAIM", "kept", 1000)  # an unnamed holder: no `holder`
    admin.hset(b"emq:{kept}:job:" + mine[1], "claimed_ms", 1)  # as if claimed long ago
    before = dict(admin.zrange("emq:{kept}:active", 0, -1, withscores=True))
    client = _Client({"host": "127.0.0.1", "port": emqd_port})
    try:
        kept = keep_once(client, b"kept", {ours.client_id()}, 60_000, 5_000,
                         int(time.time() * 1000))
    finally:
        client.close()
    after = dict(admin.zrange("emq:{kept}:active", 0, -1, withscores=True))
    assert kept == 1
    assert after[mine[0]] > before[mine[0]] + 50_000  # extended to a minute
    assert after[mine[1]] == before[mine[1]]  # past the timeout: left to run out
    assert after[other] == before[other]
    assert admin.hget(b"emq:{kept}:job:" + mine[0], "holder") == str(ours.client_id()).encode()
    for client_ in (ours, theirs, admin):
        client_.close()


def test_the_keeper_ends_when_its_pipe_closes(emqd_port: int) -> None:
    keeper = Keeper.start({"host": "127.0.0.1", "port": emqd_port}, b"q", 3000, None)
    keeper.beat([1])
    assert keeper.proc.poll() is None
    keeper.close()
    assert keeper.proc.returncode == 0


def test_the_keeper_goes_where_the_worker_s_connections_went(emqd_port: int) -> None:
    """Started for a front that is gone since, told where the worker's connections are
    now: its next round extends the worker's leases there."""
    ours, admin = redis.Redis(port=emqd_port), redis.Redis(port=emqd_port)
    ours.client_setname("emqd-worker?host=a")
    admin.execute_command("EMQ.ADD", "moved", "p")
    job = ours.execute_command("EMQ.CLAIM", "moved", 1500)[0]
    deadline = admin.zscore("emq:{moved}:active", job)
    keeper = Keeper.start({"host": "127.0.0.1", "port": free_port()}, b"moved", 1500, None)
    try:
        keeper.tell([ours.client_id()], {"host": "127.0.0.1", "port": emqd_port})
        # No beat follows: the worker's loop is stuck, so the keeper takes over.
        until = time.monotonic() + 5
        while admin.zscore("emq:{moved}:active", job) == deadline:
            assert time.monotonic() < until, "the keeper did not extend the lease"
            time.sleep(0.05)
    finally:
        keeper.close()
        for client in (ours, admin):
            client.close()
