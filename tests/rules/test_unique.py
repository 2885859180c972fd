"""EMQ.ADD ... UNIQUE key [TTL ms] (emqd/rules/unique.py): one live job per key."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from emqd import errors
from emqd.verbs import add, claim, complete, fail, remove, revive
from tests.verbs.jobs import P, check_invariant, members, row, run, snapshot
from tests.verbs.planner import NOW, drive, hash_of, keyspace


def added(space: Any, *options: Any, now: int = NOW) -> list:
    return run(add, ["emq.add", "q", "x", *options], space, now=now)


def test_the_live_job_is_answered_marked_while_it_lives() -> None:
    space = keyspace()
    assert added(space, "UNIQUE", "k") == [b"1", b"added"]
    assert row(space, "1")[b"unique"] == b"k"
    assert hash_of(space, P + b"unique") == {b"k": b"1"}
    before = snapshot(space)
    assert drive(add, ["emq.add", "q", "y", "UNIQUE", "k"], space).ops == []
    assert added(space, "UNIQUE", "k") == [b"1", b"exists"]  # pending
    assert snapshot(space) == before
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    assert added(space, "UNIQUE", "k") == [b"1", b"exists"]  # active
    assert run(fail, ["emq.fail", "q", job_id, token, "BACKOFF", 10], space)[0] == b"scheduled"
    assert added(space, "UNIQUE", "k") == [b"1", b"exists"]  # scheduled
    assert added(space, "UNIQUE", "other") == [b"2", b"added"]
    check_invariant(space)


@pytest.mark.parametrize("end", ["complete", "dead", "remove"])
def test_the_key_is_free_once_its_job_is_done(end: str) -> None:
    space = keyspace()
    added(space, "UNIQUE", "k")
    if end == "remove":
        assert run(remove, ["emq.remove", "q", "1"], space) == 1
    else:
        job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
        if end == "complete":
            assert run(complete, ["emq.complete", "q", job_id, token], space) == "OK"
        else:
            assert run(fail, ["emq.fail", "q", job_id, token, "MAXATTEMPTS", 1], space)[0] == \
                b"dead"
    assert hash_of(space, P + b"unique") is None
    assert added(space, "UNIQUE", "k") == [b"2", b"added"]
    if end == "dead":  # a revived job does not take its key back from the new one ...
        run(revive, ["emq.revive", "q", "1"], space)
        assert hash_of(space, P + b"unique") == {b"k": b"2"}
    check_invariant(space)


def test_a_revived_job_takes_its_key_back_when_it_is_free() -> None:
    space = keyspace()
    added(space, "UNIQUE", "k")
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    run(fail, ["emq.fail", "q", job_id, token, "MAXATTEMPTS", 1], space)
    assert hash_of(space, P + b"unique") is None
    assert run(revive, ["emq.revive", "q", "1"], space) == "OK"
    assert hash_of(space, P + b"unique") == {b"k": b"1"}
    assert added(space, "UNIQUE", "k") == [b"1", b"exists"]


def test_a_revived_job_takes_back_a_key_whose_ttl_hold_ran_out() -> None:
    # The expired TTL entry must go with it: left behind, it made the key look free
    # (holder trusts the TTL over the live owner) and let a second live job take it.
    space = keyspace()
    added(space, "UNIQUE", "k", "MAXATTEMPTS", 1)
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    run(fail, ["emq.fail", "q", job_id, token], space)  # dead: the key is free
    assert added(space, "UNIQUE", "k", "TTL", 1000) == [b"2", b"added"]
    later = NOW + 2000
    assert run(revive, ["emq.revive", "q", "1"], space, now=later) == "OK"
    assert hash_of(space, P + b"unique") == {b"k": b"1"}
    assert members(space, b"unique:ttl") == []
    assert added(space, "UNIQUE", "k", now=later) == [b"1", b"exists"]
    check_invariant(space)


def test_a_ttl_holds_the_key_for_its_time_whatever_the_job_does() -> None:
    space = keyspace()
    assert added(space, "UNIQUE", "k", "TTL", 100) == [b"1", b"added"]
    assert row(space, "1")[b"unique_until"] == b"%d" % (NOW + 100)
    job_id, token, _, _ = run(claim, ["emq.claim", "q", 1000], space)
    run(complete, ["emq.complete", "q", job_id, token], space)
    assert hash_of(space, P + b"unique") == {b"k": b"1"}  # completed, still held
    assert added(space, "UNIQUE", "k", "TTL", 100, now=NOW + 99) == [b"1", b"exists"]
    assert added(space, "UNIQUE", "k", now=NOW + 100) == [b"2", b"added"]  # its time is up
    assert members(space, b"unique:ttl") == []  # now a key held while its job lives
    assert hash_of(space, P + b"unique") == {b"k": b"2"}


def test_expired_keys_are_purged_by_later_adds() -> None:
    space = keyspace()
    for i in range(20):
        added(space, "UNIQUE", f"k{i}", "TTL", 10)
    added(space, "UNIQUE", "late", now=NOW + 10)
    assert len(hash_of(space, P + b"unique")) == 20 - 16 + 1  # 16 purged per ADD
    added(space, "UNIQUE", "later", now=NOW + 10)
    assert set(hash_of(space, P + b"unique")) == {b"late", b"later"}
    assert members(space, b"unique:ttl") == []


def test_id_and_unique_together() -> None:
    space = keyspace()
    assert added(space, "ID", "a", "UNIQUE", "k") == [b"a", b"added"]
    assert added(space, "ID", "a", "UNIQUE", "z") == [b"a", b"exists"]  # ID's rule first
    assert added(space, "ID", "b", "UNIQUE", "k") == [b"a", b"exists"]
    assert row(space, "b") is None


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["TTL", "10"], errors.SYNTAX),
        (["UNIQUE"], errors.SYNTAX),
        (["UNIQUE", ""], errors.INVALID_UNIQUE_KEY),
        (["UNIQUE", "k" * 257], errors.INVALID_UNIQUE_KEY),
        (["UNIQUE", "k", "TTL", "0"], errors.must_be_positive("TTL")),
        (["UNIQUE", "k", "TTL", "x"], errors.must_be_positive("TTL")),
        (["UNIQUE", "k", "TTL", str(2**63 - 1)], errors.invalid_time("TTL", "emq.add")),
    ],
)
def test_refusals_write_nothing(options: list, error: Any) -> None:
    space = keyspace()
    before = snapshot(space)
    assert drive(add, ["emq.add", "q", "x", *options], space) == error
    assert snapshot(space) == before


def test_a_holder_row_of_the_wrong_type_refuses() -> None:
    space = keyspace(**{"emq:{q}:unique": {"k": "1"}, "emq:{q}:job:1": [("a", 1)]})
    assert drive(add, ["emq.add", "q", "x", "UNIQUE", "k"], space) == errors.WRONGTYPE


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.ADD", "mail", "hi", "UNIQUE", "ada") == [b"1", b"added"]
    assert r.execute_command("EMQ.ADD", "mail", "hi", "UNIQUE", "ada") == [b"1", b"exists"]
    assert r.execute_command("EMQ.ADD", "mail", "plain") == b"2"
    job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "mail", 1000)
    r.execute_command("EMQ.COMPLETE", "mail", job_id, token)
    assert r.execute_command("EMQ.ADD", "mail", "hi", "UNIQUE", "ada") == [b"3", b"added"]
