"""EMQ.PAUSE and EMQ.RESUME: the `meta.paused` flag, and RESUME's write wakes watchers."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import pause, resume
from tests.verbs.planner import commit, drive, effects, hash_of, keyspace

META = b"emq:{q}:meta"


@pytest.mark.parametrize(
    ("verb", "meta", "expected"),
    [
        (pause, None, Plan([(b"HSET", META, b"paused", b"1")], "OK")),
        (pause, {"seq": "3"}, Plan([(b"HSET", META, b"paused", b"1")], "OK")),
        (pause, {"paused": "0"}, Plan([(b"HSET", META, b"paused", b"1")], "OK")),
        (pause, {"paused": "1"}, Plan([], "OK")),
        (resume, {"paused": "1"}, Plan([(b"HDEL", META, b"paused")], "OK")),
        (resume, {"paused": "junk"}, Plan([(b"HDEL", META, b"paused")], "OK")),
        (resume, {"seq": "3"}, Plan([], "OK")),
        (resume, None, Plan([], "OK")),
    ],
)
def test_planner(verb: object, meta: dict | None, expected: Plan) -> None:
    space = keyspace(**({"emq:{q}:meta": meta} if meta is not None else {}))
    assert effects(drive(verb, [verb.__name__, "q"], space)) == effects(expected)  # type: ignore[attr-defined]


@pytest.mark.parametrize("verb", [pause, resume])
def test_refusals(verb: object) -> None:
    assert drive(verb, ["x", "q"], keyspace(**{"emq:{q}:meta": [("m", 1)]})) == errors.WRONGTYPE
    assert drive(verb, ["x", "{q}"], keyspace()) == errors.INVALID_QUEUE


def test_resume_writes_the_meta_key_that_parked_claimers_watch() -> None:
    space = keyspace(**{"emq:{q}:meta": {"seq": "1", "paused": "1"}})
    space.watched[META] = 1
    commit(space, drive(resume, ["emq.resume", "q"], space))
    assert space.take_ready() == {META}
    assert hash_of(space, META) == {b"seq": b"1"}


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.PAUSE", "mail") == b"OK"
    assert r.hgetall("emq:{mail}:meta") == {b"paused": b"1"}
    assert r.execute_command("EMQ.PAUSE", "mail") == b"OK"
    assert r.execute_command("EMQ.RESUME", "mail") == b"OK"
    assert r.exists("emq:{mail}:meta") == 0  # the empty hash is deleted, as Redis does
    assert r.execute_command("EMQ.RESUME", "mail") == b"OK"
