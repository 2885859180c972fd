"""Retention: trim_ops directly (oldest first, the plan's own rows, at most 100, the
`trimmed` counter) and the housekeeping slice through its planner."""

from __future__ import annotations

import pytest

from emqd import errors
from emqd.commit.plan import AGING, Plan
from emqd.config import Config
from emqd.layout import queue_keys
from emqd.rules import retention
from emqd.verbs import complete
from tests.verbs.jobs import P, add_jobs, claim_one, members, row, run
from tests.verbs.planner import NOW, RUN_ID, drive, hash_of, keyspace

KEYS = queue_keys(b"q")


def finished(kind: str, n: int, **extra: object):  # type: ignore[no-untyped-def]
    data: dict = {f"emq:{{q}}:{kind}": [(f"j{i:03}", 100 + i) for i in range(n)], **extra}
    for i in range(n):
        data[f"emq:{{q}}:job:j{i:03}"] = {"state": kind}
    return keyspace(**data)


def trim(space, kind: str, keep: int, added=()):  # type: ignore[no-untyped-def]
    return retention.trim_ops(space, KEYS, kind, keep, added)


def test_nothing_in_excess() -> None:
    assert trim(finished("completed", 3), "completed", 3) == []
    assert trim(finished("dead", 2), "dead", 3, [(NOW, b"x")]) == []


def test_oldest_first_and_completed_not_counted() -> None:
    assert trim(finished("completed", 5), "completed", 3) == [
        (b"ZREM", P + b"completed", b"j000", b"j001"),
        (b"DEL", P + b"job:j000", P + b"job:j001"),
    ]


def test_dead_letters_are_counted_in_trimmed() -> None:
    space = finished("dead", 3, **{"emq:{q}:metrics:failed": {"count": "9"}})
    assert trim(space, "dead", 1, [(NOW, b"new")]) == [
        (b"ZREM", P + b"dead", b"j000", b"j001", b"j002"),
        (b"DEL", P + b"job:j000", P + b"job:j001", P + b"job:j002"),
        (b"HINCRBY", P + b"metrics:failed", b"trimmed", 3),
    ]


def test_the_plans_own_rows_count_and_can_be_trimmed() -> None:
    space = finished("completed", 1)
    # the new row is older than the stored one (its score is smaller): it goes first
    assert trim(space, "completed", 1, [(50, b"new")]) == [
        (b"ZREM", P + b"completed", b"new"), (b"DEL", P + b"job:new")]


def test_corrupt_trimmed_counter_refuses() -> None:
    space = finished("dead", 2, **{"emq:{q}:metrics:failed": {"trimmed": "1e3"}})
    with pytest.raises(errors.ReplyError) as caught:
        trim(space, "dead", 0)
    assert caught.value == errors.HASH_NOT_INTEGER


def test_housekeeping_slices() -> None:
    space = finished("dead", 250, **{"emq:{q}:config": {"keep_dead": "20"}})
    args = retention.slice_args(b"q", Config())
    deleted = []
    for _ in range(5):
        plan = retention.plan(args, space, NOW, RUN_ID)
        assert isinstance(plan, Plan)
        space.apply(plan.ops)
        deleted.append(plan.reply)
    assert deleted == [100, 100, 30, 0, 0]
    assert [m for m, _ in members(space, b"dead")][:1] == [b"j230"]
    assert row(space, "j229") is None and row(space, "j230") is not None
    assert hash_of(space, P + b"metrics:failed") == {b"trimmed": b"230"}


def test_housekeeping_slice_trims_both_sets() -> None:
    space = finished("completed", 3)
    space.data.update(finished("dead", 2).data)
    plan = retention.plan(retention.slice_args(b"q", Config(keep_completed=1, keep_dead=1)),
                          space, NOW, RUN_ID)
    assert plan.reply == 3


# --- by age: keep_completed_ms / keep_dead_ms ---------------------------------------------
def test_rows_older_than_their_age_limit_are_in_excess() -> None:
    space = finished("completed", 5)  # finished at 100 .. 104
    ops = retention.trim_ops(space, KEYS, "completed", 1000, (), keep_ms=10, now_ms=112)
    assert ops == [(b"ZREM", P + b"completed", b"j000", b"j001", b"j002"),
                   (b"DEL", P + b"job:j000", P + b"job:j001", P + b"job:j002")]
    # the count cap still counts: the larger excess wins
    ops = retention.trim_ops(space, KEYS, "completed", 1, (), keep_ms=10, now_ms=112)
    assert ops[0] == (b"ZREM", P + b"completed", b"j000", b"j001", b"j002", b"j003")
    assert retention.trim_ops(space, KEYS, "completed", 1000, (), keep_ms=0, now_ms=10**9) == []


def test_complete_trims_by_age_and_tells_housekeeping_when_to_come_back() -> None:
    space = keyspace(**{"emq:{q}:config": {"keep_completed_ms": "1000"}})
    add_jobs(space, 2)
    job_id, token, _, _ = claim_one(space)
    run(complete, ["emq.complete", "q", job_id, token], space)
    job_id, token, _, _ = claim_one(space, now=NOW + 1000)
    plan = drive(complete, ["emq.complete", "q", job_id, token], space, now=NOW + 1000)
    assert plan.due == ((AGING, b"q", NOW + 2000),)
    space.apply(plan.ops)
    assert [m for m, _ in members(space, b"completed")] == [b"2"]  # the first aged out


def test_next_aging_is_the_oldest_row_plus_its_limit() -> None:
    config = Config(keep_dead_ms=50)
    space = finished("dead", 3)
    assert retention.next_aging(space, KEYS, config) == 150
    assert retention.next_aging(space, KEYS, Config()) is None
    space = finished("completed", 2, **{"emq:{q}:config": {"keep_completed_ms": "7"}})
    assert retention.next_aging(space, KEYS, Config()) == 107
    plan = retention.plan(retention.slice_args(b"q", Config()), space, 107, RUN_ID)
    assert plan.reply == 1
