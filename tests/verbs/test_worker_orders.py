"""EMQ.WORKER and EMQ.BEAT (emqd/verbs/worker_order.py, beat.py): an operator's instruction to
one worker, read back by the worker's beat; over the wire."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.commit.plan import Plan
from emqd.verbs import beat, worker_order
from tests.verbs.jobs import P, run, snapshot, wire_error
from tests.verbs.planner import NOW, drive, effects, hash_of, keyspace

NAME = "emqd-worker?host=web-1&pid=42&queue=q&concurrency=4&started=1700000000000"


def told(space: object, name: str = NAME) -> bytes:
    return drive(beat, ["emq.beat", "q", name], space)


def test_quiet_stop_and_run_are_what_the_beat_answers() -> None:
    space = keyspace()
    assert told(space) == b"run"
    plan = drive(worker_order, ["emq.worker", "q", "quiet", NAME], space)
    assert effects(plan) == effects(Plan(
        [(b"HSET", P + b"workers", NAME.encode(), b"quiet %d" % NOW)], "OK"))
    space.apply(plan.ops)
    assert told(space) == b"quiet" and told(space, "another") == b"run"
    assert run(worker_order, ["emq.worker", "q", "STOP", NAME], space, now=NOW + 5) == "OK"
    assert told(space) == b"stop"
    assert run(worker_order, ["emq.worker", "q", "Run", NAME], space) == "OK"
    assert told(space) == b"run" and hash_of(space, P + b"workers") is None


def test_an_instruction_already_given_writes_nothing() -> None:
    space = keyspace()
    run(worker_order, ["emq.worker", "q", "quiet", NAME], space)
    assert drive(worker_order, ["emq.worker", "q", "quiet", NAME], space,
                 now=NOW + 1000).ops == []
    assert drive(worker_order, ["emq.worker", "q", "run", "nobody"], space).ops == []


def test_stops_older_than_a_day_are_pruned_by_the_next_instruction() -> None:
    space = keyspace(**{"emq:{q}:workers": {
        "gone": f"stop {NOW - 86_400_001}", "recent": f"stop {NOW - 1000}",
        "quiet": f"quiet {NOW - 10 * 86_400_000}", "odd": "stop soon"}})
    run(worker_order, ["emq.worker", "q", "quiet", NAME], space)
    assert set(hash_of(space, P + b"workers")) == {b"recent", b"quiet", b"odd", NAME.encode()}


def test_a_value_in_another_form_reads_as_run() -> None:
    space = keyspace(**{"emq:{q}:workers": {NAME: "pause", "bare": "quiet"}})
    assert told(space) == b"run" and told(space, "bare") == b"quiet"


@pytest.mark.parametrize(
    ("verb", "argv", "error"),
    [
        (worker_order, ["emq.worker", "q", "sleep", NAME], errors.SYNTAX),
        (worker_order, ["emq.worker", "q", "quiet", ""], errors.INVALID_WORKER),
        (worker_order, ["emq.worker", "q", "quiet", "x" * 4097], errors.INVALID_WORKER),
        (worker_order, ["emq.worker", "{q}", "quiet", NAME], errors.INVALID_QUEUE),
        (beat, ["emq.beat", "q", ""], errors.INVALID_WORKER),
    ],
)
def test_refusals_write_nothing(verb: object, argv: list, error: errors.ReplyError) -> None:
    space = keyspace(**{"emq:{q}:workers": {"a": "quiet 1"}})
    before = snapshot(space)
    assert drive(verb, argv, space) == error  # type: ignore[arg-type]
    assert snapshot(space) == before


def test_wrongtype_is_refused() -> None:
    space = keyspace(**{"emq:{q}:workers": [("a", 1)]})
    assert drive(worker_order, ["emq.worker", "q", "stop", NAME], space) == errors.WRONGTYPE
    assert told(space) == errors.WRONGTYPE


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.BEAT", "q", NAME) == b"run"
    assert r.execute_command("EMQ.WORKER", "q", "QUIET", NAME) == b"OK"
    assert r.execute_command("EMQ.BEAT", "q", NAME) == b"quiet"
    assert r.hget("emq:{q}:workers", NAME).startswith(b"quiet ")
    assert r.execute_command("EMQ.WORKER", "q", "STOP", NAME) == b"OK"
    assert r.execute_command("EMQ.BEAT", "q", NAME) == b"stop"
    assert wire_error(r, "EMQ.WORKER", "q", "HALT", NAME) == "syntax error"
    assert wire_error(r, "EMQ.WORKER", "q", "QUIET") == \
        "wrong number of arguments for 'emq.worker' command"
    assert r.execute_command("EMQ.WORKER", "q", "RUN", NAME) == b"OK"
    assert r.execute_command("EMQ.BEAT", "q", NAME) == b"run"
    assert r.execute_command("EMQ.QUEUES") == []  # steering registers no queue
