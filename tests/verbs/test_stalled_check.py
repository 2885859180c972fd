"""EMQ.STALLED.CHECK: each verdict (ghost, exempt, counted recover, counted dead), the
whole-call refusals, bad numbers; then over the wire with real expiries."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.verbs import stalled_check
from tests.support import start_emqd
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    claim_one,
    members,
    row,
    run,
    snapshot,
    wire_error,
    wire_snapshot,
)
from tests.verbs.planner import NOW, OTHER_RUN_ID, RUN_ID, drive, effects, hash_of, keyspace

OURS = RUN_ID.decode()
THEIRS = OTHER_RUN_ID.decode()


def active(*rows: tuple[str, dict | None, int], **extra: object):  # type: ignore[no-untyped-def]
    """A keyspace with `active` members (id, row or None for a ghost, deadline)."""
    data: dict = {"emq:{q}:active": [(i, at) for i, _, at in rows], **extra}
    for job_id, fields, _ in rows:
        if fields is not None:
            data[f"emq:{{q}}:job:{job_id}"] = {"state": "active", "attempts": "1", **fields}
    return keyspace(**data)


def test_nothing_expired_writes_nothing() -> None:
    space = active(("1", {"lease_epoch": OURS}, NOW + 1))
    result = drive(stalled_check, ["emq.stalled.check", "q"], space)
    assert effects(result) == effects(Plan([], [[], []]))


def test_ghost_is_removed_and_listed_nowhere() -> None:
    space = active(("g", None, NOW - 1))
    assert effects(drive(stalled_check, ["emq.stalled.check", "q"], space)) == effects(Plan(
        [(b"ZREM", P + b"active", b"g")], [[], []]))
    run(stalled_check, ["emq.stalled.check", "q"], space)
    assert row(space, "g") is None  # no row created
    assert space.data == {}


@pytest.mark.parametrize("epoch", [{"lease_epoch": THEIRS}, {}])
def test_exempt_after_a_restart_is_recovered_uncounted(epoch: dict) -> None:
    space = active(("1", {"stalled": "1", "priority": "3", **epoch}, NOW))
    result = drive(stalled_check, ["emq.stalled.check", "q", "MAXSTALLED", "1"], space)
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"ready_ms", b"%d" % NOW, b"state", b"pending"),
            (b"ZADD", P + b"pending", 3 * 2**40, b"1"),
        ],
        [[b"1"], []],
    ))


def test_exempt_ignores_a_corrupt_stalled() -> None:
    space = active(("1", {"stalled": "x", "lease_epoch": THEIRS}, NOW))
    assert run(stalled_check, ["emq.stalled.check", "q"], space) == [[b"1"], []]
    assert row(space, "1")[b"stalled"] == b"x"


def test_counted_recover() -> None:
    space = active(("1", {"lease_epoch": OURS}, NOW - 5))
    result = drive(stalled_check, ["emq.stalled.check", "q"], space)  # max_stalled 2
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"stalled", b"1", b"ready_ms", b"%d" % NOW,
             b"state", b"pending"),
            (b"ZADD", P + b"pending", 0, b"1"),
            (b"HSET", P + b"metrics", b"stalled", b"1"),
        ],
        [[b"1"], []],
    ))


def test_counted_dead() -> None:
    space = active(("1", {"lease_epoch": OURS, "stalled": "1"}, NOW - 5))
    result = drive(stalled_check, ["emq.stalled.check", "q"], space)
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"active", b"1"),
            (b"HSET", P + b"job:1", b"stalled", b"2", b"last_error", b"stalled",
             b"state", b"dead", b"finished_ms", b"%d" % NOW),
            (b"ZADD", P + b"dead", NOW, b"1"),
            (b"HSET", P + b"metrics:failed", b"count", b"1"),
        ],
        [[], [b"1"]],
    ))


def test_maxstalled_argument_and_queue_setting() -> None:
    space = active(("1", {"lease_epoch": OURS}, NOW))
    assert drive(stalled_check, ["emq.stalled.check", "q", "MAXSTALLED", "1"],
                 space).reply == [[], [b"1"]]
    space = active(("1", {"lease_epoch": OURS}, NOW), **{"emq:{q}:config": {"max_stalled": "1"}})
    assert drive(stalled_check, ["emq.stalled.check", "q"], space).reply == [[], [b"1"]]
    assert drive(stalled_check, ["emq.stalled.check", "q"], active(
        ("1", {"lease_epoch": OURS}, NOW)), config=Config(max_stalled=1)).reply == [[], [b"1"]]


def test_every_case_in_one_call_in_selection_order() -> None:
    space = active(
        ("d", {"lease_epoch": OURS, "stalled": "1"}, NOW - 4),
        ("g", None, NOW - 3),
        ("e", {"lease_epoch": THEIRS}, NOW - 2),
        ("r", {"lease_epoch": OURS}, NOW - 1),
        ("later", {"lease_epoch": OURS}, NOW + 1),
    )
    assert run(stalled_check, ["emq.stalled.check", "q"], space) == [[b"e", b"r"], [b"d"]]
    assert members(space, b"active") == [(b"later", NOW + 1)]
    assert [m for m, _ in members(space, b"pending")] == [b"e", b"r"]
    assert members(space, b"dead") == [(b"d", NOW)]
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"1"}
    check_invariant(space)


def test_limit_takes_the_earliest_deadlines() -> None:
    space = active(*((str(i), {"lease_epoch": OURS}, NOW - 10 + i) for i in range(5)))
    assert run(stalled_check, ["emq.stalled.check", "q", "LIMIT", "2"], space) == [
        [b"0", b"1"], []]
    assert len(members(space, b"active")) == 3


def test_limit_over_the_cap_is_clamped() -> None:
    extra = stalled_check.MAX_LIMIT + 7
    space = active(*((f"{i:05}", {"lease_epoch": THEIRS}, NOW - 1) for i in range(extra)))
    recovered, dead = run(stalled_check, ["emq.stalled.check", "q", "LIMIT", extra * 10], space)
    assert (len(recovered), dead) == (stalled_check.MAX_LIMIT, [])
    assert len(members(space, b"active")) == 7
    recovered, _ = run(stalled_check, ["emq.stalled.check", "q", "LIMIT", extra * 10], space)
    assert len(recovered) == 7
    check_invariant(space)


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        # a row key holding a sorted set, after a member that would be recovered
        ([("1", {"lease_epoch": OURS}, NOW - 2), ("2", "zset", NOW - 1)], errors.WRONGTYPE),
        # a corrupt stalled of a member to be counted, after a member that would die
        ([("1", {"lease_epoch": OURS, "stalled": "1"}, NOW - 2),
          ("2", {"lease_epoch": OURS, "stalled": "01"}, NOW - 1)], errors.HASH_NOT_INTEGER),
        ([("1", {"lease_epoch": OURS, "stalled": str(2**63 - 1)}, NOW)], errors.OVERFLOW),
        ([("1", {"lease_epoch": THEIRS, "priority": "x"}, NOW)],
         errors.corrupt_job_field(b"priority")),
    ],
)
def test_whole_call_refusal_writes_nothing(rows: list, error: errors.ReplyError) -> None:
    space = active(*[(i, None if f == "zset" else f, at) for i, f, at in rows])
    for job_id, fields, _ in rows:
        if fields == "zset":
            space.apply([(b"ZADD", P + b"job:" + job_id.encode(), 1, b"x")])
    before = snapshot(space)
    assert drive(stalled_check, ["emq.stalled.check", "q"], space) == error
    assert snapshot(space) == before


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["MAXSTALLED", "0"], errors.must_be_positive("MAXSTALLED")),
        (["MAXSTALLED", "-1"], errors.must_be_positive("MAXSTALLED")),
        (["MAXSTALLED", "1.0"], errors.must_be_positive("MAXSTALLED")),
        (["LIMIT", "0"], errors.must_be_positive("LIMIT")),
        (["LIMIT", "ten"], errors.must_be_positive("LIMIT")),
        (["LIMIT"], errors.SYNTAX),
        (["MAXSTALLED", "1", "MAXSTALLED", "1"], errors.SYNTAX),
    ],
)
def test_bad_numbers_are_refused_before_reading(argv: list, error: errors.ReplyError) -> None:
    # `active` holds a hash: any read would answer WRONGTYPE, so these never read
    space = keyspace(**{"emq:{q}:active": {"not": "a zset"}})
    assert drive(stalled_check, ["emq.stalled.check", "q", *argv], space) == error


def test_recovered_job_keeps_its_budget_and_old_holder_is_stale() -> None:
    space = keyspace()
    add_jobs(space, 1)
    claim_one(space, lease=10)
    assert run(stalled_check, ["emq.stalled.check", "q"], space, now=NOW + 10) == [[b"1"], []]
    assert row(space, "1")[b"stalled"] == b"1"
    assert b"failures" not in row(space, "1")
    assert claim_one(space, now=NOW + 11)[:2] == [b"1", b"2"]
    check_invariant(space)


# --- over the wire ------------------------------------------------------------------
def test_over_the_wire_recover_then_dead(rq: redis.Redis) -> None:
    rq.execute_command("EMQ.ADD", "q", "a")
    rq.execute_command("EMQ.ADD", "q", "ghost")
    assert len(rq.execute_command("EMQ.CLAIM", "q", "20", "COUNT", "2")) == 2
    rq.delete("emq:{q}:job:2")
    time.sleep(0.03)
    assert rq.execute_command("EMQ.STALLED.CHECK", "q") == [[b"1"], []]
    assert rq.exists("emq:{q}:job:2") == 0
    assert rq.hget("emq:{q}:job:1", "stalled") == b"1"
    rq.execute_command("EMQ.CLAIM", "q", "20")
    time.sleep(0.03)
    assert rq.execute_command("EMQ.STALLED.CHECK", "q", "LIMIT", "5") == [[], [b"1"]]
    assert rq.hget("emq:{q}:job:1", "state") == b"dead"
    assert rq.hget("emq:{q}:job:1", "last_error") == b"stalled"
    assert rq.type("emq:{q}:active") == b"none"


def test_over_the_wire_refusals_write_nothing(rq: redis.Redis) -> None:
    rq.execute_command("EMQ.ADD", "q", "a")
    rq.execute_command("EMQ.ADD", "q", "b")
    rq.execute_command("EMQ.CLAIM", "q", "10", "COUNT", "2")
    rq.hset("emq:{q}:job:2", "stalled", "x")
    time.sleep(0.02)
    before = wire_snapshot(rq)
    assert wire_error(rq, "EMQ.STALLED.CHECK", "q") == "hash value is not an integer"
    assert wire_error(rq, "EMQ.STALLED.CHECK", "q", "MAXSTALLED", "0") == (
        "MAXSTALLED must be a positive integer")
    assert wire_error(rq, "EMQ.STALLED.CHECK", "q", "LIMIT", "-3") == (
        "LIMIT must be a positive integer")
    assert wire_error(rq, "EMQ.REAP", "q").startswith("unknown command 'EMQ.REAP'")
    assert wire_snapshot(rq) == before


def test_a_lease_that_crossed_a_restart_is_exempt(tmp_path: Path) -> None:
    """End to end with the append-only file: the lease was granted by the previous
    process, so the sweep returns it to pending without counting a stall."""
    flags = ("--appendonly", "yes", "--appendfsync", "always", "--stalled-interval", "0")
    server = start_emqd(*flags, dir=str(tmp_path))
    try:
        with redis.Redis(port=server.port) as client:
            client.execute_command("EMQ.ADD", "q", "a")
            client.execute_command("EMQ.ADD", "q", "b")
            assert len(client.execute_command("EMQ.CLAIM", "q", "30", "COUNT", "2")) == 2
            old_epoch = client.execute_command("EMQ.EPOCH")
    finally:
        server.stop()
    server = start_emqd(*flags, dir=str(tmp_path), port=server.port)
    try:
        with redis.Redis(port=server.port) as client:
            assert client.execute_command("EMQ.EPOCH") != old_epoch
            # Job 2's lease is renewed by this process: its stall counts.
            client.execute_command("EMQ.EXTEND", "q", "2", "1", "30")
            time.sleep(0.05)
            assert client.execute_command("EMQ.STALLED.CHECK", "q", "MAXSTALLED", "1") == [
                [b"1"], [b"2"]]
            assert client.hgetall("emq:{q}:job:1")[b"state"] == b"pending"
            assert client.hget("emq:{q}:job:1", "stalled") is None
            assert client.hget("emq:{q}:job:2", "stalled") == b"1"
    finally:
        server.stop()


# --- the server's sweep (slice_args): a corrupt row is quarantined ------------------------
def sweep(space):  # type: ignore[no-untyped-def]
    """The server's sweep: housekeeping's arguments, planned and, unless refused, applied."""
    try:
        result = stalled_check.plan(stalled_check.slice_args(b"q", 100, Config()), space, NOW,
                                    RUN_ID)
    except errors.ReplyError as error:
        return error
    space.apply(result.ops)
    return result.reply


@pytest.mark.parametrize(("fields", "last_error"), [
    ({"lease_epoch": OURS, "stalled": "01"},
     b"ERR hash value is not an integer (field 'stalled')"),
    ({"lease_epoch": OURS, "stalled": str(2**63 - 1)},
     b"ERR increment or decrement would overflow (field 'stalled')"),
    ({"lease_epoch": THEIRS, "priority": "x"}, b"ERR job field 'priority' holds an invalid value"),
    ({"lease_epoch": OURS, "priority": "1001"}, b"ERR job field 'priority' holds an invalid value"),
])
def test_the_sweep_dead_letters_a_corrupt_row_and_recovers_the_rest(
    fields: dict, last_error: bytes
) -> None:
    rows = [("a", {"lease_epoch": OURS}, NOW - 3), ("bad", fields, NOW - 2),
            ("c", {"lease_epoch": THEIRS}, NOW - 1)]
    space = active(*rows, **{"emq:{q}:metrics:failed": {"count": "4"}})
    before = snapshot(space)
    # a hand call refuses the whole call, as before
    assert isinstance(drive(stalled_check, ["emq.stalled.check", "q"], space), errors.ReplyError)
    assert snapshot(space) == before
    assert sweep(space) == [[b"a", b"c"], [], [[b"bad", last_error]]]
    bad = row(space, "bad")
    assert (bad[b"state"], bad[b"last_error"], bad[b"finished_ms"]) == (
        b"dead", last_error, b"%d" % NOW)
    assert [m for m, _ in members(space, b"dead")] == [b"bad"]
    assert sorted(m for m, _ in members(space, b"pending")) == [b"a", b"c"]
    assert members(space, b"active") == []
    assert hash_of(space, P + b"metrics:failed")[b"count"] == b"5"  # counted, as CLAIM's
    check_invariant(space)


def test_the_sweep_still_refuses_what_is_not_a_row_of_its_own() -> None:
    """A row key holding a sorted set cannot be dead-lettered: the sweep refuses, and
    housekeeping finds and holds that member as before."""
    space = active(("1", {"lease_epoch": OURS}, NOW - 2), ("2", None, NOW - 1))
    space.apply([(b"ZADD", P + b"job:2", 1, b"x")])
    assert sweep(space) == errors.WRONGTYPE
