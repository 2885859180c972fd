"""The trace context a job carries (protocol section 22.4): EMQ.ADD / EMQ.FLOW ... TRACE keeps
it in the row, EMQ.CLAIM ... WITHTRACE hands it out; without them nothing changes."""

from __future__ import annotations

import pytest
import redis

from emqd import errors
from emqd.verbs import add, claim, complete, flow
from tests.verbs.jobs import row, run
from tests.verbs.planner import drive, keyspace

CTX = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize("options", [[], ["GROUP", "g"]])
def test_add_keeps_it_and_claim_withtrace_hands_it_out_fifth(options: list) -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "traced", "TRACE", CTX, *options], space)
    run(add, ["emq.add", "q", "plain", *options], space)
    assert row(space, "1")[b"trace"] == CTX.encode()
    first = run(claim, ["emq.claim", "q", 1000, "WITHTRACE"], space)
    assert first == [b"1", b"1", b"traced", 0, CTX.encode()]
    if options:  # a lane lets one job run at a time
        run(complete, ["emq.complete", "q", "1", "1"], space)
    assert run(claim, ["emq.claim", "q", 1000, "COUNT", 5, "WITHTRACE"], space) == [
        [b"2", b"1", b"plain", 0, None]]


def test_without_withtrace_the_reply_keeps_its_four_elements() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "traced", "TRACE", CTX], space)
    assert run(claim, ["emq.claim", "q", 1000], space) == [b"1", b"1", b"traced", 0]


def test_each_job_of_a_flow_has_its_own() -> None:
    space = keyspace()
    run(flow, ["emq.flow", "q", "parent", "TRACE", "p-ctx", "CHILD", "q", "kid", "TRACE",
               "c-ctx", "CHILD", "q", "untraced"], space)
    assert [row(space, job_id).get(b"trace") for job_id in ("1", "2", "3")] == [
        b"p-ctx", b"c-ctx", None]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["emq.add", "q", "x", "TRACE", "x" * 4097], errors.too_long("TRACE", 4096)),
        (["emq.add", "q", "x", "TRACE"], errors.SYNTAX),
        (["emq.claim", "q", "1000", "WITHTRACE", "WITHTRACE"], errors.SYNTAX),
    ],
)
def test_refusals(argv: list, error: errors.ReplyError) -> None:
    space = keyspace()
    assert drive(add if argv[0] == "emq.add" else claim, argv, space) == error
    assert space.data == {}


def test_a_replace_carries_the_new_adds_context_or_none() -> None:
    space = keyspace()
    run(add, ["emq.add", "q", "a", "UNIQUE", "k", "TRACE", "first"], space)
    run(add, ["emq.add", "q", "b", "UNIQUE", "k", "TRACE", "second", "REPLACE"], space)
    assert row(space, "1")[b"trace"] == b"second"
    run(add, ["emq.add", "q", "c", "UNIQUE", "k", "REPLACE"], space)
    assert b"trace" not in row(space, "1")


def test_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.ADD", "q", "hello", "TRACE", CTX) == b"1"
    assert r.execute_command("EMQ.CLAIM", "q", 30_000, "WITHTRACE") == [
        b"1", b"1", b"hello", 0, CTX.encode()]
