"""EMQ.STATS: set sizes and counters in the protocol's order, O(1) in lanes."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.config import Config
from emqd.verbs import stats
from tests.verbs.planner import RecordingView, drive, keyspace

ORDER = [b"pending", b"active", b"scheduled", b"dead", b"completed", b"completed_total",
         b"failed_total", b"trimmed_dead", b"paused", b"waiting",
         # issue 25, item 7: the counters under /metrics' names, after the older fields
         b"added_total", b"dead_total", b"failures_total", b"retried_total", b"stalled_total",
         b"revived_total",
         # issue 38: the jobs EMQ.CANCEL ended, last
         b"cancelled", b"cancelled_total"]
ZEROS = dict.fromkeys(ORDER, 0)

FULL = {
    "emq:{q}:pending": [("1", 1), ("2", 2)],
    "emq:{q}:active": [("3", 10)],
    "emq:{q}:scheduled": [("4", 5), ("5", 6), ("6", 7)],
    "emq:{q}:dead": [("7", 1)],
    "emq:{q}:completed": [("8", 1), ("9", 2)],
    "emq:{q}:meta": {"seq": "9", "paused": "1", "lanes_pending": "4", "added": "20"},
    "emq:{q}:metrics:completed": {"count": "12"},
    "emq:{q}:metrics": {"failed": "9", "retried": "4", "stalled": "2", "revived": "1",
                        "cancelled": "7"},
    "emq:{q}:metrics:failed": {"count": "5", "trimmed": "3"},
    "emq:{q}:waiting": [("10", 1)],
    "emq:{q}:cancelled": [("11", 1)],
}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ZEROS),
        (FULL, {b"pending": 6, b"active": 1, b"scheduled": 3, b"dead": 1, b"completed": 2,
                b"completed_total": 12, b"failed_total": 5, b"trimmed_dead": 3, b"paused": 1,
                b"waiting": 1, b"added_total": 20, b"dead_total": 5, b"failures_total": 9,
                b"retried_total": 4, b"stalled_total": 2, b"revived_total": 1,
                b"cancelled": 1, b"cancelled_total": 7}),
        ({"emq:{q}:meta": {"paused": "0"}}, ZEROS),
        ({"emq:{q}:meta": {"lanes_pending": "2"}, "emq:{q}:pending": [("1", 1)]},
         {**ZEROS, b"pending": 3}),
        ({"emq:{other}:pending": [("1", 1)]}, ZEROS),
        ({"emq:{q}:metrics:completed": {"count": "01"}}, errors.HASH_NOT_INTEGER),
        ({"emq:{q}:meta": {"lanes_pending": "x"}}, errors.HASH_NOT_INTEGER),
        ({"emq:{q}:metrics": {"retried": "x"}}, errors.HASH_NOT_INTEGER),
        ({"emq:{q}:dead": {"a": "b"}}, errors.WRONGTYPE),
    ],
)
def test_planner(data: dict, expected: object) -> None:
    got = drive(stats, ["emq.stats", "q"], keyspace(**data))
    assert got == expected
    if isinstance(expected, dict):
        assert list(got) == ORDER


def test_reads_are_constant_in_the_number_of_lanes() -> None:
    few = {"emq:{q}:lane:a": [("1", 1)], "emq:{q}:meta": {"lanes_pending": "1"}}
    many = {f"emq:{{q}}:lane:g{i}": [(str(i), 1)] for i in range(500)}
    many["emq:{q}:meta"] = {"lanes_pending": "500"}
    args = stats.parse([b"emq.stats", b"q"], Config())
    seen = []
    for data, pending in ((few, 1), (many, 500)):
        view = RecordingView(keyspace(**data))
        assert stats.plan(args, view, 0, b"")[b"pending"] == pending  # type: ignore[arg-type]
        seen.append(view.reads)
    assert seen[0] == seen[1] and len(seen[0]) == 19  # fixed reads: no lane is visited


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "mail", "a")
    r.execute_command("EMQ.ADD", "mail", "b", "DELAY", "60000")
    r.execute_command("EMQ.PAUSE", "mail")
    got = r.execute_command("EMQ.STATS", "mail")  # redis-py 8 speaks RESP3: a map
    assert list(got.items()) == [(b"pending", 1), (b"active", 0), (b"scheduled", 1), (b"dead", 0),
                                 (b"completed", 0), (b"completed_total", 0), (b"failed_total", 0),
                                 (b"trimmed_dead", 0), (b"paused", 1), (b"waiting", 0),
                                 (b"added_total", 2), (b"dead_total", 0), (b"failures_total", 0),
                                 (b"retried_total", 0), (b"stalled_total", 0),
                                 (b"revived_total", 0), (b"cancelled", 0),
                                 (b"cancelled_total", 0)]
    assert r.execute_command("EMQ.STATS", "never") == {name: 0 for name in ORDER}
    with redis.Redis(port=r.connection_pool.connection_kwargs["port"], protocol=2) as r2:
        assert r2.execute_command("EMQ.STATS", "mail")[:4] == [b"pending", 1, b"active", 0]
