"""EMQ.QUEUES: every queue that held a job, in creation order."""

from __future__ import annotations

import time

import pytest
import redis

from emqd import errors
from emqd.verbs import queues
from tests.verbs.planner import drive, keyspace


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, []),
        ({"emq:queues": [("b", 1), ("a", 2), ("c", 3)]}, [b"b", b"a", b"c"]),
        ({"emq:queues": [("b", 5), ("a", 5), ("10", 1)]}, [b"10", b"a", b"b"]),
        ({"emq:queues": {"a": "1"}}, errors.WRONGTYPE),
    ],
)
def test_planner(data: dict, expected: object) -> None:
    assert drive(queues, ["emq.queues"], keyspace(**data)) == expected


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.QUEUES") == []
    for name in ("zeta", "alpha", "mid"):
        r.execute_command("EMQ.ADD", name, "x")
        time.sleep(0.002)  # distinct creation milliseconds
    r.execute_command("EMQ.ADD", "alpha", "again")
    r.execute_command("EMQ.PAUSE", "paused-only")  # holds no job: not a queue yet
    assert r.execute_command("EMQ.QUEUES") == [b"zeta", b"alpha", b"mid"]
