"""EMQ.ADD ... UNIQUE key [REPLACE] [EXTEND] (emqd/rules/debounce.py): a later add changes the
job that still waits under its key; over the wire, against a CLAIM in the same loop turn."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from emqd import errors
from emqd.verbs import add, claim, complete, fail, promote
from tests.support import RawClient, encode_request
from tests.verbs.jobs import (
    P,
    check_invariant,
    check_lanes,
    check_unique,
    members,
    row,
    run,
    snapshot,
)
from tests.verbs.planner import NOW, drive, hash_of, keyspace, set_field


def added(space: Any, payload: str, *options: Any, now: int = NOW) -> Any:
    return run(add, ["emq.add", "q", payload, "UNIQUE", "k", *options], space, now=now)


def check(space: Any, now: int = NOW) -> None:
    check_invariant(space)
    check_lanes(space)
    check_unique(space, now)


def test_replace_gives_the_waiting_job_the_last_payload_and_options_in_its_place() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "before"], space)
    assert added(space, "v1", "PRIORITY", "5", "MAXATTEMPTS", "2") == [b"2", b"added"]
    run(add, ["emq.add", "q", "after"], space)
    assert added(space, "v2", "BACKOFF", "exp:10", "REPLACE") == [b"2", b"replaced"]
    job = row(space, "2")
    assert (job[b"payload"], job[b"backoff"]) == (b"v2", b"exp:10")
    assert b"priority" not in job and b"max_attempts" not in job  # not given: deleted
    assert job[b"created_ms"] == b"%d" % NOW and job[b"unique"] == b"k"
    assert members(space, b"pending") == [(b"1", 1.0), (b"2", 2.0), (b"3", 3.0)]  # its seq kept
    assert hash_of(space, P + b"meta")[b"added"] == b"3"  # no job added
    check(space)


def test_a_new_priority_keeps_the_sequence_part_of_the_score() -> None:
    space = keyspace()
    added(space, "a", "PRIORITY", "3")
    plan = drive(add, ["emq.add", "q", "b", "UNIQUE", "k", "PRIORITY", "-2", "REPLACE"], space)
    assert plan.events == [("debounced", b"q", b"1", NOW, None)]
    space.apply(plan.ops)
    assert members(space, b"pending") == [(b"1", float(-2 * 2**40 + 1))]
    check(space)


def test_a_new_group_moves_the_job_to_its_lane_and_back() -> None:
    space = keyspace()
    added(space, "a")
    assert added(space, "b", "GROUP", "g", "REPLACE")[1] == b"replaced"
    assert members(space, b"pending") == [] and members(space, b"lane:g") == [(b"1", 1.0)]
    check(space)
    assert added(space, "c", "REPLACE")[1] == b"replaced"
    assert members(space, b"pending") == [(b"1", 1.0)] and members(space, b"lane:g") == []
    check(space)


def test_ten_adds_then_one_job_with_the_last_payload_runs_after_the_last_delay() -> None:
    """The debounce: REPLACE EXTEND DELAY 100, ten adds 10 ms apart: one job, the last
    payload, due 100 ms after the last add."""
    space = keyspace()
    for i in range(10):
        reply = added(space, f"v{i}", "DELAY", "100", "REPLACE", "EXTEND", now=NOW + 10 * i)
        assert reply == [b"1", b"added" if i == 0 else b"replaced"]
    assert members(space, b"scheduled") == [(b"1", NOW + 90 + 100)]
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 189) == 0
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 190) == 1
    job_id, _, payload, _ = run(claim, ["emq.claim", "q", 1000], space, now=NOW + 190)
    assert (job_id, payload) == (b"1", b"v9")
    check(space, NOW + 190)


def test_replace_alone_keeps_the_due_time_extend_alone_keeps_the_payload() -> None:
    space = keyspace()
    added(space, "a", "DELAY", "1000")
    assert added(space, "b", "DELAY", "5000", "REPLACE", now=NOW + 10) == [b"1", b"replaced"]
    assert members(space, b"scheduled") == [(b"1", NOW + 1000)]
    assert row(space, "1")[b"payload"] == b"b"
    assert added(space, "c", "DELAY", "5000", "EXTEND", now=NOW + 20) == [b"1", b"extended"]
    assert members(space, b"scheduled") == [(b"1", NOW + 5020)]
    assert row(space, "1")[b"payload"] == b"b"
    check(space)


def test_extend_without_a_delay_runs_it_now_as_promotion_would() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "first"], space)
    added(space, "a", "DELAY", "1000")
    assert added(space, "b", "EXTEND", now=NOW + 5) == [b"2", b"extended"]
    assert members(space, b"pending") == [(b"1", 1.0), (b"2", 3.0)]  # a new seq: the back
    assert row(space, "2")[b"state"] == b"pending" and row(space, "2")[b"ready_ms"] == \
        b"%d" % (NOW + 5)
    assert hash_of(space, P + b"meta")[b"seq"] == b"3"
    check(space, NOW + 5)


def test_a_retry_waiting_in_scheduled_enters_at_the_front_when_extended() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "other"], space)
    added(space, "a", "PRIORITY", "-1")
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    assert job_id == b"2"
    run(fail, ["emq.fail", "q", job_id, token, "BACKOFF", 60_000], space)
    assert added(space, "b", "PRIORITY", "-1", "REPLACE", "EXTEND") == [b"2", b"replaced"]
    assert members(space, b"pending")[0] == (b"2", float(-(2**40)))  # claimed before: front
    assert row(space, "2")[b"failures"] == b"1"  # its budget spent is its own
    check(space)


def test_extend_restarts_a_ttl_hold() -> None:
    space = keyspace()
    added(space, "a", "TTL", "1000", "DELAY", "500")
    assert added(space, "b", "TTL", "1000", "DELAY", "500", "EXTEND", now=NOW + 400) == \
        [b"1", b"extended"]
    assert row(space, "1")[b"unique_until"] == b"%d" % (NOW + 1400)
    assert members(space, b"unique:ttl") == [(b"k", NOW + 1400)]
    check(space, NOW + 400)


@pytest.mark.parametrize("holder", ["active", "completed under a ttl"])
def test_a_holder_that_runs_or_finished_keeps_the_key_and_nothing_is_written(holder: str) -> None:
    space = keyspace()
    added(space, "a", *(["TTL", "60000"] if holder != "active" else []))
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    if holder != "active":
        run(complete, ["emq.complete", "q", job_id, token], space)
    before = snapshot(space)
    assert added(space, "b", "REPLACE", "EXTEND") == [b"1", b"exists"]
    assert snapshot(space) == before
    assert row(space, "1")[b"payload"] == b"a"


def test_an_existing_id_answers_first_and_a_new_id_is_not_taken_by_a_replace() -> None:
    space = keyspace()
    added(space, "a", "ID", "x")
    assert added(space, "b", "ID", "x", "REPLACE") == [b"x", b"exists"]
    assert added(space, "c", "ID", "y", "REPLACE") == [b"x", b"replaced"]
    assert row(space, "y") is None and row(space, "x")[b"payload"] == b"c"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["REPLACE"], errors.SYNTAX),  # without UNIQUE
        (["EXTEND"], errors.SYNTAX),
        (["UNIQUE", "k", "REPLACE", "REPLACE"], errors.SYNTAX),
        (["UNIQUE", "k", "REPLACE", "x"], errors.SYNTAX),
    ],
)
def test_bad_flags_are_refused(argv: list, error: errors.ReplyError) -> None:
    space = keyspace()
    assert drive(add, ["emq.add", "q", "x", *argv], space) == error
    assert space.data == {}


def test_a_corrupt_holder_priority_refuses_the_replace_and_writes_nothing() -> None:
    space = keyspace()
    added(space, "a")
    set_field(space, P + b"job:1", b"priority", b"high")
    before = snapshot(space)
    assert drive(add, ["emq.add", "q", "b", "UNIQUE", "k", "REPLACE"], space) == \
        errors.corrupt_job_field(b"priority")
    assert snapshot(space) == before


# --- over the wire: the race with a CLAIM in the same loop turn --------------------------
def _pipelined(port: int, *requests: list[Any]) -> bytes:
    """Send every request in one write (one read of the server's, one loop turn); the bytes of
    their replies, in order."""
    client = RawClient(port)
    try:
        client.send(b"".join(encode_request(*request) for request in requests))
        return b"".join(client.read_reply() for _ in requests)
    finally:
        client.close()


def test_replace_then_claim_in_one_turn_the_claim_gets_the_new_payload(
        r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "old", "UNIQUE", "k")
    replies = _pipelined(emqd_port, ["EMQ.ADD", "q", "new", "UNIQUE", "k", "REPLACE"],
                         ["EMQ.CLAIM", "q", "30000"])
    assert replies == (b"*2\r\n$1\r\n1\r\n$8\r\nreplaced\r\n"
                       b"*4\r\n$1\r\n1\r\n$1\r\n1\r\n$3\r\nnew\r\n:0\r\n")


def test_claim_then_replace_in_one_turn_the_add_is_told_it_changed_nothing(
        r: redis.Redis, emqd_port: int) -> None:
    r.execute_command("EMQ.ADD", "q", "old", "UNIQUE", "k")
    replies = _pipelined(emqd_port, ["EMQ.CLAIM", "q", "30000"],
                         ["EMQ.ADD", "q", "new", "UNIQUE", "k", "REPLACE"])
    assert replies == (b"*4\r\n$1\r\n1\r\n$1\r\n1\r\n$3\r\nold\r\n:0\r\n"
                       b"*2\r\n$1\r\n1\r\n$6\r\nexists\r\n")
    assert r.hget("emq:{q}:job:1", "payload") == b"old"  # what the claim handed out


def test_on_two_connections_the_claim_hands_out_what_the_row_held_at_its_turn(
        r: redis.Redis, emqd_port: int) -> None:
    """Two connections whose requests arrive together: whichever runs first, the claimed
    payload is the row's at the claim, and the ADD's reply says whether it changed the job
    (replaced) or not (exists). Repeated over both orders, each bounded."""
    for attempt in range(40):
        r.flushall()
        r.execute_command("EMQ.ADD", "q", "old", "UNIQUE", "k")
        a, b = RawClient(emqd_port), RawClient(emqd_port)
        try:
            first, second = (a, b) if attempt % 2 else (b, a)
            first.send(encode_request("EMQ.ADD", "q", "new", "UNIQUE", "k", "REPLACE"))
            second.send(encode_request("EMQ.CLAIM", "q", "30000"))
            added_reply, claimed = first.read_reply(), second.read_reply()
        finally:
            a.close()
            b.close()
        if added_reply.endswith(b"$8\r\nreplaced\r\n"):
            assert b"$3\r\nnew\r\n" in claimed
        else:
            assert added_reply.endswith(b"$6\r\nexists\r\n") and b"$3\r\nold\r\n" in claimed
        assert r.hget("emq:{q}:job:1", "state") == b"active"


def test_ten_adds_in_a_hundred_ms_make_one_job_with_the_last_payload(r: redis.Redis) -> None:
    """The issue's debounce over the wire: ten adds within 100 ms, each REPLACE EXTEND
    DELAY 200: one job, claimed once the last delay has passed, with the last payload."""
    for i in range(10):
        reply = r.execute_command("EMQ.ADD", "q", f"v{i}", "UNIQUE", "k", "DELAY", 200,
                                  "REPLACE", "EXTEND")
        assert reply[0] == b"1"
    assert r.zcard("emq:{q}:scheduled") == 1 and r.execute_command("EMQ.STATS", "q")[
        b"added_total"] == 1
    job_id, _, payload, _ = r.execute_command("EMQ.CLAIM", "q", 30_000, "BLOCK", 5000)
    assert (job_id, payload) == (b"1", b"v9")
    assert r.execute_command("EMQ.CLAIM", "q", 30_000) is None
