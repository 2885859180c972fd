"""The partition suite's judge (history.py) finds each kind of fault in a made-up history,
and none in a clean one: a judge that cannot fail would pass every scenario."""

from __future__ import annotations

from typing import Any

from tests.partition.history import Bounds, judge

BOUNDS = Bounds(lease_s=2.0, timeout_s=1.0, slack_s=0.5)


def rec(op: str, job: str, t0: float = 0.0, t1: float = 0.1, error: str | None = None,
        token: str | None = None, client: str = "f1-w0", **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"client": client, "op": op, "queue": "q", "t0": t0, "t1": t1,
                              "error": error, **extra}
    if op == "claim":
        if error is None:
            record.update(id=job, token=token)
        record.setdefault("block_ms", 500)
    else:
        record["id"] = job
        if token is not None:
            record["token"] = token
    return record


CLEAN = [rec("add", "a"), rec("add", "b"), rec("claim", "a", token="1"),
         rec("complete", "a", token="1"), rec("add", "c", error="TryAgainError: TRYAGAIN x")]
DUMP = {"q": {"a": {"state": "completed"}, "b": {"state": "pending"}}}


def test_a_clean_history_has_no_fault() -> None:
    verdict = judge(CLEAN, DUMP, BOUNDS)
    assert all(n == 0 for n in verdict.faults().values()), verdict
    assert verdict.counts["adds acknowledged"] == 2 and verdict.counts["refused"] == 1


def test_an_acknowledged_add_the_cluster_does_not_hold_is_lost() -> None:
    verdict = judge(CLEAN, {"q": {"a": {"state": "completed"}}}, BOUNDS)
    assert verdict.lost == [("q", "b")]


def test_a_completed_job_whose_row_is_gone_is_not_lost_but_its_completion_is_undone() -> None:
    verdict = judge(CLEAN, {"q": {"b": {"state": "pending"}}}, BOUNDS)
    assert verdict.lost == [] and verdict.completions_undone == [("q", "a", "1", "(no row)")]


def test_one_token_handed_to_two_claims_and_two_completions_are_found() -> None:
    history = [*CLEAN, rec("claim", "a", token="1", client="f2-w0"),
               rec("complete", "a", token="2", client="f2-w0")]
    verdict = judge(history, DUMP, BOUNDS)
    assert verdict.tokens_twice == [("q", "a", "1")]
    assert verdict.completed_twice == [("q", "a")]


def test_a_payload_sent_once_without_an_id_held_by_two_jobs_was_added_twice() -> None:
    history = [*CLEAN, rec("add", "7", payload="p-once")]
    dump = {"q": {**DUMP["q"], "7": {"payload": "p-once"}, "8": {"payload": "p-once"},
                  "9": {"payload": "work"}, "10": {"payload": "work"}}}
    verdict = judge(history, dump, BOUNDS)
    assert verdict.added_twice == [("q", "p-once")] and verdict.lost == []


def test_a_completion_the_cluster_went_back_on_is_undone() -> None:
    verdict = judge(CLEAN, {"q": {"a": {"state": "pending"}, "b": {"state": "pending"}}}, BOUNDS)
    assert verdict.completions_undone == [("q", "a", "1", "pending")]


def test_a_wait_past_its_bound_is_late_but_time_its_front_was_stopped_is_not_counted() -> None:
    late = rec("add", "b", t0=10.0, t1=14.0)  # bound: 2 + 1 + 0.5
    blocking = rec("claim", "z", t0=0.0, t1=8.0, token="1", block_ms=5000)  # bound 8.5
    verdict = judge([late, blocking], {"q": {"b": {}, "z": {}}}, BOUNDS)
    assert [(client, op) for client, op, _, _ in verdict.late] == [("f1-w0", "add")]
    frozen = Bounds(lease_s=2.0, timeout_s=1.0, slack_s=0.5, frozen={"f1": [(9.0, 11.0)]})
    assert judge([late], {"q": {"b": {}}}, frozen).late == []  # 1 s of it stopped
