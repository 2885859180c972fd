"""EMQ.CONFIG: effective settings, every pair validated before anything is written."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.verbs import queue_config as config
from tests.verbs.planner import drive, effects, keyspace

KEY = b"emq:{q}:config"
DEFAULTS = {b"max_attempts": b"3", b"backoff": b"fixed:1000", b"max_stalled": b"2",
            b"keep_completed": b"1000", b"keep_dead": b"10000", b"lane_limit": b"1",
            b"keep_log_lines": b"100", b"keep_completed_ms": b"0", b"keep_dead_ms": b"0"}


@pytest.mark.parametrize(
    ("stored", "argv", "expected"),
    [
        (None, ["GET"], DEFAULTS),
        ({"max_attempts": "9", "colour": "red"}, ["GET"], {**DEFAULTS, b"max_attempts": b"9"}),
        ({"backoff": "exp:5"}, ["get", "BACKOFF"], b"exp:5"),
        (None, ["GET", "keep_dead"], b"10000"),
        ({"keep_dead": "bad"}, ["GET", "keep_dead"], b"bad"),
        (None, ["GET", "colour"], errors.unknown_field(b"colour")),
        (None, ["GET", "a", "b"], errors.SYNTAX),
        (None, ["SET", "max_attempts", "5", "Backoff", "exp:10:100"],
         Plan([(b"HSET", KEY, b"max_attempts", b"5", b"backoff", b"exp:10:100")], "OK")),
        (None, ["SET", "keep_completed", "0"],
         Plan([(b"HSET", KEY, b"keep_completed", b"0")], "OK")),
        (None, ["SET", "keep_log_lines", "0"],
         Plan([(b"HSET", KEY, b"keep_log_lines", b"0")], "OK")),
        (None, ["SET", "keep_log_lines", "-1"], errors.must_be_non_negative("keep_log_lines")),
        (None, ["SET", "max_attempts", "5", "keep_dead", "-1"],
         errors.must_be_non_negative("keep_dead")),
        (None, ["SET", "max_stalled", "0"], errors.must_be_positive("max_stalled")),
        (None, ["SET", "max_attempts", "01"], errors.must_be_positive("max_attempts")),
        (None, ["SET", "backoff", "soon"], errors.INVALID_BACKOFF),
        (None, ["SET", "Colour", "1"], errors.unknown_field(b"Colour")),
        (None, ["SET", "max_attempts"], errors.SYNTAX),
        (None, ["SET"], errors.SYNTAX),
        (None, ["SET", "max_attempts", "1", "MAX_ATTEMPTS", "2"], errors.SYNTAX),
        (None, ["DEL", "max_attempts"], errors.SYNTAX),
    ],
)
def test_planner(stored: dict | None, argv: list, expected: object) -> None:
    space = keyspace(**({"emq:{q}:config": stored} if stored is not None else {}))
    assert effects(drive(config, ["emq.config", "q", *argv], space)) == effects(expected)


def test_defaults_come_from_the_server_flags() -> None:
    got = drive(config, ["emq.config", "q", "GET"], keyspace(),
                config=Config(max_attempts=8, backoff="exp:1"))
    assert got[b"max_attempts"] == b"8" and got[b"backoff"] == b"exp:1"
    assert list(got) == list(DEFAULTS)


def test_set_on_a_wrongtype_key_writes_nothing() -> None:
    space = keyspace(**{"emq:{q}:config": [("m", 1)]})
    assert drive(config, ["emq.config", "q", "SET", "max_attempts", "2"], space) == errors.WRONGTYPE


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.CONFIG", "mail", "SET", "max_attempts", "5") == b"OK"
    with pytest.raises(redis.ResponseError, match="keep_dead must be a non-negative integer"):
        r.execute_command("EMQ.CONFIG", "mail", "SET", "max_stalled", "4", "keep_dead", "x")
    got = r.execute_command("EMQ.CONFIG", "mail", "GET")
    assert got[b"max_attempts"] == b"5" and got[b"max_stalled"] == b"2"
    assert r.hgetall("emq:{mail}:config") == {b"max_attempts": b"5"}
    assert r.execute_command("EMQ.CONFIG", "mail", "GET", "max_attempts") == b"5"
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'emq.config'"):
        r.execute_command("EMQ.CONFIG", "mail")
