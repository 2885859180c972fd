"""A stale holder over the wire: a token from before a requeue or a recovery is refused
by COMPLETE, FAIL, REQUEUE and EXTEND, and the refusal writes nothing."""

from __future__ import annotations

import time

import redis

from tests.verbs.jobs import wire_error, wire_snapshot


def _stale_calls(job_id: bytes, token: bytes) -> list[tuple]:
    return [
        ("EMQ.COMPLETE", "q", job_id, token),
        ("EMQ.FAIL", "q", job_id, token),
        ("EMQ.REQUEUE", "q", job_id, token),
        ("EMQ.EXTEND", "q", job_id, token, "1000"),
    ]


def _assert_refused(r: redis.Redis, job_id: bytes, token: bytes, text: str) -> None:
    before = wire_snapshot(r)
    for call in _stale_calls(job_id, token):
        assert wire_error(r, *call) == text, call
    assert wire_snapshot(r) == before


def test_token_from_before_a_requeue(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    job_id, old, _, _ = r.execute_command("EMQ.CLAIM", "q", "1000")
    assert r.execute_command("EMQ.REQUEUE", "q", job_id, old) == b"OK"
    _assert_refused(r, job_id, old, "EMQSTALE job not active")  # pending again
    assert r.execute_command("EMQ.CLAIM", "q", "1000")[:2] == [job_id, b"2"]
    _assert_refused(r, job_id, old, "EMQSTALE token mismatch")  # a new holder has it
    assert r.execute_command("EMQ.COMPLETE", "q", job_id, b"2") == b"OK"


def test_token_from_before_a_recovery(rq: redis.Redis) -> None:
    rq.execute_command("EMQ.ADD", "q", "a")
    job_id, old, _, _ = rq.execute_command("EMQ.CLAIM", "q", "10")
    time.sleep(0.02)
    assert rq.execute_command("EMQ.STALLED.CHECK", "q") == [[job_id], []]
    _assert_refused(rq, job_id, old, "EMQSTALE job not active")  # recovered: pending again
    assert rq.execute_command("EMQ.CLAIM", "q", "60000")[:2] == [job_id, b"2"]
    _assert_refused(rq, job_id, old, "EMQSTALE token mismatch")
    assert rq.execute_command("EMQ.EXTEND", "q", job_id, b"2", "60000") > 0
    assert rq.execute_command("EMQ.COMPLETE", "q", job_id, b"2") == b"OK"
