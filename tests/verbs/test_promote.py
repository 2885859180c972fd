"""EMQ.PROMOTE: due order, LIMIT, back of the band with a new seq if never claimed, front
of the band if claimed before; ghosts; refusals; over the wire."""

from __future__ import annotations

import time

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import add, fail, promote
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    claim_one,
    members,
    row,
    run,
    snapshot,
)
from tests.verbs.planner import NOW, drive, effects, keyspace

BAND = 2**40


def test_first_entry_gets_a_new_seq_at_the_back_of_its_band() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "7"},
                        "emq:{q}:job:a": {"state": "scheduled", "priority": "2"},
                        "emq:{q}:scheduled": [("a", NOW)]})
    assert effects(drive(promote, ["emq.promote", "q"], space)) == effects(Plan(
        [
            (b"ZREM", P + b"scheduled", b"a"),
            (b"HSET", P + b"job:a", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", 2 * BAND + 8, b"a"),
            (b"HSET", P + b"meta", b"seq", b"8"),
        ],
        1,
    ))


def test_claimed_before_re_enters_at_the_front_without_a_seq() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "7"},
                        "emq:{q}:job:a": {"state": "scheduled", "attempts": "1",
                                          "claimed_ms": "1"},
                        "emq:{q}:scheduled": [("a", NOW)]})
    assert effects(drive(promote, ["emq.promote", "q"], space)) == effects(Plan(
        [
            (b"ZREM", P + b"scheduled", b"a"),
            (b"HSET", P + b"job:a", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", 0, b"a"),
        ],
        1,
    ))


def test_due_order_limit_and_not_yet_due() -> None:
    space = keyspace()
    for delay in (30, 10, 20, 1000):
        run(add, ["emq.add", "q", "x", "DELAY", delay], space)
    assert run(promote, ["emq.promote", "q", "LIMIT", "2"], space, now=NOW + 30) == 2
    # jobs 2 (due +10) and 3 (due +20) entered, each with a new seq after ADD's 4
    assert members(space, b"pending") == [(b"2", 5.0), (b"3", 6.0)]
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 30) == 1
    assert members(space, b"scheduled") == [(b"4", float(NOW + 1000))]
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 999) == 0
    check_invariant(space)


def test_a_failed_job_is_retried_at_the_front() -> None:
    space = keyspace()
    add_jobs(space, 3)
    claim_one(space)
    run(fail, ["emq.fail", "q", "1", "1", "BACKOFF", "5"], space)
    assert run(promote, ["emq.promote", "q"], space, now=NOW + 5) == 1
    assert [m for m, _ in members(space, b"pending")] == [b"1", b"2", b"3"]
    assert row(space, "1")[b"failures"] == b"1"  # promotion charges nothing
    check_invariant(space)


def test_limit_over_the_cap_is_clamped() -> None:
    extra = promote.MAX_LIMIT + 3
    space = keyspace()
    add_jobs(space, extra, "DELAY", "10")
    assert run(promote, ["emq.promote", "q", "LIMIT", extra * 10], space, now=NOW + 10) == \
        promote.MAX_LIMIT
    assert len(members(space, b"scheduled")) == 3
    assert run(promote, ["emq.promote", "q", "LIMIT", extra * 10], space, now=NOW + 10) == 3
    check_invariant(space)


def test_ghost_is_removed_and_not_counted() -> None:
    space = keyspace(**{"emq:{q}:scheduled": [("g", 1)]})
    assert effects(drive(promote, ["emq.promote", "q"], space)) == effects(Plan(
        [(b"ZREM", P + b"scheduled", b"g")], 0))


@pytest.mark.parametrize(
    ("data", "argv", "error"),
    [
        ({"emq:{q}:meta": {"seq": "x"}}, [], errors.HASH_NOT_INTEGER),
        ({"emq:{q}:meta": {"seq": str(2**63 - 1)}}, [], errors.OVERFLOW),
        ({"emq:{q}:job:a": {"state": "scheduled", "priority": "-1001"}}, [],
         errors.corrupt_job_field(b"priority")),
        ({"emq:{q}:pending": {"x": "y"}}, [], errors.WRONGTYPE),
        ({}, ["LIMIT", "0"], errors.must_be_positive("LIMIT")),
        ({}, ["LIMIT", "1", "X"], errors.SYNTAX),
    ],
)
def test_refusals_write_nothing(data: dict, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**{"emq:{q}:job:a": {"state": "scheduled"},
                        "emq:{q}:scheduled": [("a", NOW)], **data})
    before = snapshot(space)
    assert drive(promote, ["emq.promote", "q", *argv], space) == error
    assert snapshot(space) == before


def test_over_the_wire(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "later", "DELAY", "60000")
    r.execute_command("EMQ.ADD", "q", "soon", "DELAY", "20")
    assert r.execute_command("EMQ.PROMOTE", "q") == 0
    time.sleep(0.03)
    # The server's own promotion timer may have promoted job 2 already: either way
    # exactly one promotion happened, and job 1 still waits.
    by_verb = r.execute_command("EMQ.PROMOTE", "q", "LIMIT", "10")
    assert by_verb in (0, 1)
    assert r.hget("emq:{q}:job:2", "state") == b"pending"
    assert r.hget("emq:{q}:job:1", "state") == b"scheduled"
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:3] == [b"2", b"1", b"soon"]
