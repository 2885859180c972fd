"""The issue's story over the wire, with and without the log: a token is never accepted
for a job it was not issued for, even once its id names another job (PROTOCOL.md 6.1)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from tests.support import send_shutdown, start_emqd

STALE = "EMQSTALE"


def story(r: redis.Redis) -> tuple[bytes, list]:
    """ADD q A ID X, CLAIM, the lease runs out and is recovered, REMOVE q X, ADD q B ID X,
    CLAIM: the old holder's token and the new claim."""
    assert r.execute_command("EMQ.ADD", "q", "A", "ID", "X") == b"X"
    old = r.execute_command("EMQ.CLAIM", "q", 5)
    time.sleep(0.02)
    assert r.execute_command("EMQ.STALLED.CHECK", "q") == [[b"X"], []]
    assert r.execute_command("EMQ.REMOVE", "q", "X") == 1
    assert r.execute_command("EMQ.ADD", "q", "B", "ID", "X") == b"X"
    new = r.execute_command("EMQ.CLAIM", "q", 60000)
    assert new[:3] != old[:3] and new[2] == b"B"
    return old[1], new


@pytest.mark.parametrize("log", ["yes", "no"])
def test_the_old_holder_cannot_complete_the_new_job(tmp_path: Path, log: str) -> None:
    server = start_emqd("--appendonly", log, "--stalled-interval", "0", dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            old_token, new = story(r)
            with pytest.raises(redis.ResponseError, match=STALE):
                r.execute_command("EMQ.COMPLETE", "q", "X", old_token, "RESULT", "A's result")
            assert r.hget("emq:{q}:job:X", "state") == b"active"
            assert r.hget("emq:{q}:job:X", "result") is None
            assert r.execute_command("EMQ.COMPLETE", "q", "X", new[1], "RESULT", "B's") == b"OK"
    finally:
        server.stop()


def test_the_floor_survives_a_restart(tmp_path: Path) -> None:
    flags = ("--appendonly", "yes", "--stalled-interval", "0")
    server = start_emqd(*flags, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            r.execute_command("EMQ.ADD", "q", "A", "ID", "X")
            for token in (b"1", b"2", b"3"):  # claimed three times: tokens up to 3
                assert r.execute_command("EMQ.CLAIM", "q", 60000)[1] == token
                r.execute_command("EMQ.REQUEUE", "q", "X", token)
            r.execute_command("EMQ.REMOVE", "q", "X")
            send_shutdown(server.port)
    finally:
        server.stop()
    server = start_emqd(*flags, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as r:
            r.execute_command("EMQ.ADD", "q", "B", "ID", "X")
            assert r.execute_command("EMQ.CLAIM", "q", 60000)[1] == b"4"
    finally:
        server.stop()
