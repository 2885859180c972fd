"""emqd/rules/tokens.py: no token is accepted but by the job and claim that issued it
(PROTOCOL.md 6.1), driven through the planners: a row created under an explicit id
starts `attempts` at the queue's floor, CLAIM raises the floor only when it issues a
token from a row that already held one, and a number the generator has not reached
yet, once taken as an explicit id, is never generated."""

from __future__ import annotations

import pytest

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.verbs import add, claim, complete, flow, promote, remove, requeue, stalled_check
from tests.verbs.jobs import P, check_invariant, claim_one, members, row, run
from tests.verbs.planner import NOW, drive, hash_of, keyspace

FLOOR = b"token_floor"


def expire_and_remove(space, job_id: bytes, now: int) -> None:  # type: ignore[no-untyped-def]
    """The issue's story: the lease runs out, the sweep recovers the job, REMOVE."""
    assert run(stalled_check, ["emq.stalled.check", "q"], space, now=now)[0] == [job_id]
    assert run(remove, ["emq.remove", "q", job_id], space, now=now) == 1


def test_an_explicit_id_added_again_never_takes_a_token_back() -> None:
    space = keyspace()
    assert run(add, ["emq.add", "q", "A", "ID", "X"], space) == b"X"
    old = claim_one(space, lease=10)
    assert old[:2] == [b"X", b"1"]  # a fresh queue: the first token is 1, as ever
    expire_and_remove(space, b"X", NOW + 10)
    assert run(add, ["emq.add", "q", "B", "ID", "X"], space, now=NOW + 20) == b"X"
    assert row(space, "X")[b"attempts"] == b"1"  # the floor: a token issued before
    new = claim_one(space, lease=1000, now=NOW + 21)
    assert new[:3] == [b"X", b"2", b"B"]
    result = drive(complete, ["emq.complete", "q", "X", old[1], "RESULT", "A's"], space,
                   now=NOW + 22)
    assert result == errors.STALE_TOKEN
    assert run(complete, ["emq.complete", "q", "X", new[1], "RESULT", "B's"], space,
               now=NOW + 23) == "OK"
    assert row(space, "X")[b"result"] == b"B's"
    check_invariant(space)


def test_a_reclaim_raises_the_floor_and_a_first_claim_does_not() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "p"], space)
    first = drive(claim, ["emq.claim", "q", 10], space)
    assert first.shape is claim.ONE  # the flat first claim keeps its Shape: nothing more
    assert all(op[1] != P + b"meta" for op in first.ops)
    space.apply(first.ops)
    run(requeue, ["emq.requeue", "q", "1", "1"], space)
    second = drive(claim, ["emq.claim", "q", 10], space)
    assert second.reply[1] == b"2"
    assert (b"HSET", P + b"meta", FLOOR, b"2") in second.ops
    assert second.shape is None
    space.apply(second.ops)
    run(requeue, ["emq.requeue", "q", "1", "2"], space)
    space.apply([(b"HSET", P + b"meta", FLOOR, b"7")])  # a higher floor stays
    third = drive(claim, ["emq.claim", "q", 10, "COUNT", 5], space)
    assert third.reply[0][1] == b"3"
    assert all(op[1] != P + b"meta" or FLOOR not in op for op in third.ops)


def test_the_floor_covers_every_token_of_a_removed_row() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "p", "ID", "X"], space)
    for token in range(1, 5):  # claimed four times: tokens 1..4
        assert claim_one(space)[1] == b"%d" % token
        run(requeue, ["emq.requeue", "q", "X", token], space)
    assert hash_of(space, P + b"meta")[FLOOR] == b"4"
    run(remove, ["emq.remove", "q", "X"], space)
    run(add, ["emq.add", "q", "p", "ID", "X"], space)
    assert claim_one(space)[1] == b"5"


@pytest.mark.parametrize("stale", ["1", "0", "2"])
def test_a_row_never_claimed_is_gone_to_any_token(stale: str) -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "1", FLOOR.decode(): "1"}})
    run(add, ["emq.add", "q", "p", "ID", "X"], space)
    assert row(space, "X")[b"attempts"] == b"1"
    for verb in (complete, requeue):
        assert drive(verb, [verb.__name__.rsplit(".", 1)[1], "q", "X", stale], space) == \
            errors.STALE_GONE


def test_promote_puts_a_never_claimed_explicit_row_at_the_back_of_its_band() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "3", FLOOR.decode(): "9"}})
    run(add, ["emq.add", "q", "p", "ID", "X", "DELAY", 5], space)
    assert row(space, "X")[b"attempts"] == b"9"
    run(promote, ["emq.promote", "q"], space, now=NOW + 5)
    assert members(space, b"pending") == [(b"X", 5.0)]  # seq 4 + 1: never claimed, so at the back


def test_generated_ids_start_at_one_and_write_no_attempts() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "3", FLOOR.decode(): "9"},
                        "emq:queues": [("q", 1)]})
    plan = drive(add, ["emq.add", "q", "p"], space)
    assert isinstance(plan, Plan) and plan.shape is add.PLAIN
    space.apply(plan.ops)
    assert b"attempts" not in row(space, "4")
    assert claim_one(space)[:2] == [b"4", b"1"]


def test_a_number_ahead_of_the_generator_taken_as_an_id_is_never_generated() -> None:
    space = keyspace()
    assert run(add, ["emq.add", "q", "A", "ID", "5"], space) == b"5"
    assert hash_of(space, P + b"meta")[b"seq"] == b"5"
    old = claim_one(space, lease=10)
    expire_and_remove(space, b"5", NOW + 10)
    ids = [run(add, ["emq.add", "q", f"p{i}"], space, now=NOW + 20) for i in range(6)]
    assert ids == [b"6", b"7", b"8", b"9", b"10", b"11"]
    assert drive(complete, ["emq.complete", "q", "5", old[1]], space) == errors.STALE_GONE


@pytest.mark.parametrize("explicit", ["05", "-5", "5x", "1099511627776"])
def test_ids_the_generator_never_makes_leave_the_sequence_alone(explicit: str) -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "A", "ID", explicit], space)
    assert hash_of(space, P + b"meta")[b"seq"] == b"1"


def test_a_flow_child_under_an_explicit_id_starts_at_the_floor() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "2", FLOOR.decode(): "6"}})
    run(flow, ["emq.flow", "q", "parent", "CHILD", "q", "kid", "ID", "c1"], space)
    assert row(space, "c1")[b"attempts"] == b"6"
    assert claim_one(space)[:2] == [b"c1", b"7"]


def test_without_a_log_an_explicit_id_starts_above_the_process_base() -> None:
    """A worker of an earlier process can hold a token of the same id: the start's id
    base (PROTOCOL.md 6.1) is the floor of a queue that has none yet."""
    space = keyspace()
    run(add, ["emq.add", "q", "A", "ID", "X"], space, config=Config(id_base=60_000_000_000))
    assert row(space, "X")[b"attempts"] == b"60000000000"


def test_a_corrupt_floor_refuses_with_hincrbys_text_and_writes_nothing() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "2", FLOOR.decode(): "x"}})
    assert drive(add, ["emq.add", "q", "p", "ID", "X"], space) == errors.HASH_NOT_INTEGER
    run(add, ["emq.add", "q", "p"], space)  # a generated id reads no floor
    claim_one(space)
    run(requeue, ["emq.requeue", "q", "3", "1"], space)
    assert drive(claim, ["emq.claim", "q", 10], space) == errors.HASH_NOT_INTEGER
