"""Lanes over the wire: EMQ.LANE.LIMIT, EMQ.LANES, EMQ.STATS, and parked claimers woken by lanes."""

from __future__ import annotations

import redis

from tests.support import RawClient
from tests.verbs.jobs import wire_error
from tests.verbs.test_claim import _job, _nothing_yet, _parked


def test_lane_limit_and_lanes_and_stats(r: redis.Redis) -> None:
    for i in range(3):
        r.execute_command("EMQ.ADD", "q", f"a{i}", "GROUP", "a")
    r.execute_command("EMQ.ADD", "q", "b0", "GROUP", "b")
    r.execute_command("EMQ.ADD", "q", "flat")
    assert r.execute_command("EMQ.LANE.LIMIT", "q", "a", "2") == b"OK"
    assert r.hgetall("emq:{q}:glimit") == {b"a": b"2"}
    claimed = r.execute_command("EMQ.CLAIM", "q", "60000", "COUNT", "10")
    assert [job[2] for job in claimed] == [b"a0", b"b0", b"flat", b"a1"]
    assert r.execute_command("EMQ.LANES", "q") == {b"a": [1, 2], b"b": [0, 1]}
    stats = r.execute_command("EMQ.STATS", "q")
    assert (stats[b"pending"], stats[b"active"]) == (1, 4)
    assert r.hget("emq:{q}:meta", "lanes_pending") == b"1"
    assert r.hgetall("emq:{q}:gactive") == {b"a": b"2", b"b": b"1"}
    assert r.zrange("emq:{q}:ring", 0, -1) == []


def test_lanes_is_a_flat_array_in_resp2_and_a_map_in_resp3(raw: RawClient) -> None:
    raw.command("EMQ.ADD", "q", "x", "GROUP", "g")
    raw.command("EMQ.ADD", "q", "y", "GROUP", "f")
    assert raw.command("EMQ.LANES", "q") == (  # groups in name order
        b"*4\r\n$1\r\nf\r\n*2\r\n:1\r\n:0\r\n$1\r\ng\r\n*2\r\n:1\r\n:0\r\n")
    raw.command("EMQ.REMOVE", "q", "2")
    raw.command("HELLO", "3")
    assert raw.command("EMQ.LANES", "q") == b"%1\r\n$1\r\ng\r\n*2\r\n:1\r\n:0\r\n"
    assert raw.command("EMQ.LANES", "none") == b"%0\r\n"


def test_refusals_over_the_wire(r: redis.Redis) -> None:
    assert wire_error(r, "EMQ.LANE.LIMIT", "q", "g", "-1") == (
        "n must be a non-negative integer")
    assert wire_error(r, "EMQ.LANE.LIMIT", "q", "{g}", "1") == "invalid group name"
    assert wire_error(r, "EMQ.ADD", "q", "x", "GROUP", "") == "invalid group name"
    assert wire_error(r, "EMQ.LANE.LIMIT", "q", "g") == (
        "wrong number of arguments for 'emq.lane.limit' command")
    assert wire_error(r, "EMQ.LANES") == "wrong number of arguments for 'emq.lanes' command"
    assert r.dbsize() == 0


def test_a_freed_slot_wakes_a_parked_claimer(emqd_port: int, r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "first", "GROUP", "g")
    r.execute_command("EMQ.ADD", "q", "second", "GROUP", "g")
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", "60000")
    client = _parked(emqd_port, "EMQ.CLAIM", "q", "60000", "BLOCK", "5000")
    try:
        assert _nothing_yet(client)  # g is full (lane_limit 1): nothing claimable
        assert r.execute_command("EMQ.COMPLETE", "q", job_id, token) == b"OK"
        assert client.read_reply() == _job("2", "1", "second")
    finally:
        client.close()


def test_a_lane_getting_work_wakes_a_parked_claimer(emqd_port: int, r: redis.Redis) -> None:
    client = _parked(emqd_port, "EMQ.CLAIM", "q", "60000", "BLOCK", "5000")
    try:
        assert _nothing_yet(client)
        r.execute_command("EMQ.ADD", "q", "x", "GROUP", "g")
        assert client.read_reply() == _job("1", "1", "x")
    finally:
        client.close()


def test_raising_a_limit_wakes_a_parked_claimer(emqd_port: int, r: redis.Redis) -> None:
    for payload in ("a", "b"):
        r.execute_command("EMQ.ADD", "q", payload, "GROUP", "g")
    r.execute_command("EMQ.CLAIM", "q", "60000")
    client = _parked(emqd_port, "EMQ.CLAIM", "q", "60000", "BLOCK", "5000")
    try:
        assert _nothing_yet(client)
        r.execute_command("EMQ.LANE.LIMIT", "q", "g", "0")
        assert client.read_reply() == _job("2", "1", "b")
    finally:
        client.close()
