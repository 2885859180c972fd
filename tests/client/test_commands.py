"""The client's sans-IO core: commands built and replies parsed, with no socket."""

from __future__ import annotations

import time
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from emqd.client.commands import (
    Added,
    Child,
    ChildInfo,
    Finished,
    Flow,
    Job,
    JobInfo,
    Lane,
    NewJob,
    QueueCommands,
    QueueEvent,
    Schedule,
    Stats,
    result_bytes,
)
from emqd.client.errors import (
    ConnectionLost,
    JobDead,
    JobStateError,
    StaleJob,
    WaitTimeout,
    translate,
)

Q = QueueCommands("mail")


def drive(operation: Any, *reply_batches: list[Any]) -> tuple[list[list[tuple]], Any]:
    """Run an operation against canned replies; the batches it sent and its result."""
    sent = []
    try:
        batch = next(operation)
        for replies in reply_batches:
            sent.append(batch)
            batch = operation.send(replies)
        raise AssertionError(f"operation wanted another round trip: {batch!r}")
    except StopIteration as done:
        return sent, done.value


def one(operation: Any, reply: Any) -> tuple[tuple, Any]:
    sent, value = drive(operation, [reply])
    assert len(sent) == 1 and len(sent[0]) == 1, sent
    return sent[0][0], value


def unnamed(command: tuple) -> tuple[str, tuple]:
    """A job's id as the client picked it (32 hex digits, issue 24 item 11), and the command
    without that `ID id` pair."""
    at = command.index("ID")
    picked = command[at + 1].decode()
    assert len(picked) == 32 and int(picked, 16) >= 0, picked
    return picked, command[:at] + command[at + 2:]


@pytest.mark.parametrize(("options", "tail"), [
    ({}, ()),
    ({"id": "order-7"}, (b"ID", b"order-7")),
    ({"delay_ms": 0}, (b"DELAY", 0)),
    ({"at_ms": 1700000000000}, (b"AT", 1700000000000)),
    ({"priority": -5}, (b"PRIORITY", -5)),
    ({"priority": 0}, ()),
    ({"max_attempts": 1, "backoff": "exp:100:5000"},
     (b"MAXATTEMPTS", 1, b"BACKOFF", b"exp:100:5000")),
    ({"group": "tenant-1"}, (b"GROUP", b"tenant-1")),
])
def test_add_builds_emq_add_with_only_the_options_given(options: dict, tail: tuple) -> None:
    command, job_id = one(Q.add(b"hello", **options), b"12")
    if "id" not in options:
        _, command = unnamed(command)
    normalised = tuple(part.encode() if isinstance(part, str) else part for part in command)
    assert normalised == (b"EMQ.ADD", b"mail", b"hello") + tail
    assert job_id == "12"


def test_every_add_names_its_job_before_the_first_try() -> None:
    """The id is picked once per call: sent again, the batch names the same job."""
    first, _ = one(Q.add(b"x"), b"1")
    second, _ = one(Q.add(b"x"), b"2")
    assert unnamed(first)[0] != unnamed(second)[0]
    operation = Q.add(b"x")
    batch = next(operation)
    assert type(batch).__name__ == "Retried" and batch.again() == batch


def test_add_refuses_delay_with_at_and_sends_objects_as_json() -> None:
    with pytest.raises(ValueError):
        next(Q.add(b"x", delay_ms=1, at_ms=2))
    for operation in (Q.add({"a": 1}), Q.add_unique({"a": 1}, "k")):
        assert next(operation)[0][2] == b'{"a":1}'  # one rule for payloads (issue 25, 5)
    assert next(Q.add_json("text"))[0][2] == b'"text"'  # add_json: JSON, whatever it is


def test_add_json_sends_compact_utf8_json() -> None:
    command, _ = one(Q.add_json({"to": "ada", "n": "é"}), b"1")
    assert command[2] == '{"to":"ada","n":"é"}'.encode()


def test_add_many_is_one_batch_with_per_job_options_winning() -> None:
    sent, ids = drive(Q.add_many([b"a", NewJob(b"b", priority=3), "c"], priority=1),
                      [b"1", b"2", b"3"])
    assert len(sent) == 1
    assert [cmd[2] for cmd in sent[0]] == [b"a", b"b", b"c"]
    assert [cmd[cmd.index("PRIORITY") + 1] for cmd in sent[0]] == [1, 3, 1]
    assert ids == ["1", "2", "3"]
    assert len({unnamed(cmd)[0] for cmd in sent[0]}) == 3
    with pytest.raises(ValueError, match="an id per job"):
        next(Q.add_many([b"a"], id="same"))


def test_add_many_sends_plain_dicts_and_other_values_as_json() -> None:
    """A dict used to be read as an options mapping: KeyError 'payload'."""
    sent, ids = drive(Q.add_many([{"to": "ada"}, {"payload": 1}, [1, "é"], 7,
                                  NewJob({"to": "bob"}, delay_ms=5)]),
                      [b"1", b"2", b"3", b"4", b"5"])
    assert [cmd[2] for cmd in sent[0]] == [
        b'{"to":"ada"}', b'{"payload":1}', '[1,"é"]'.encode(), b"7", b'{"to":"bob"}']
    assert unnamed(sent[0][4])[1][3:] == ("DELAY", 5)
    assert ids == ["1", "2", "3", "4", "5"]


def test_add_many_raises_the_first_error_reply() -> None:
    with pytest.raises(ResponseError, match="invalid backoff"):
        drive(Q.add_many([b"a", b"b"]), [b"1", ResponseError("invalid backoff rule")])


def test_add_many_of_nothing_sends_nothing() -> None:
    assert drive(Q.add_many([])) == ([], [])


def test_claim_parses_jobs_and_nil() -> None:
    command, jobs = one(Q.claim(30000, count=4, block_ms=1000),
                        [[b"7", b"2", b'{"a":1}', 1], [b"8", b"1", b"raw", 0]])
    assert command == ("EMQ.CLAIM", b"mail", 30000, "COUNT", 4, "BLOCK", 1000)
    assert jobs == [Job("7", b'{"a":1}', "2", 1), Job("8", b"raw", "1", 0)]
    assert jobs[0].json() == {"a": 1}
    assert one(Q.claim(100), [])[1] == []
    assert one(Q.claim(100), None)[1] == []


def test_tokens_and_ids_round_trip_as_exact_bytes() -> None:
    (_, [job]) = one(Q.claim(100), [[b"\xff\x00id", b"01", b"p", 0]])
    command, _ = one(Q.complete(job), b"OK")
    assert command == ("EMQ.COMPLETE", b"mail", b"\xff\x00id", b"01")


@pytest.mark.parametrize(("result", "sent"), [
    (None, None), (b"raw", b"raw"), ("text", b"text"), ({"ok": True}, b'{"ok":true}'),
    (3, b"3"),
])
def test_complete_sends_result_only_when_there_is_one(result: Any, sent: bytes | None) -> None:
    job = Job("7", b"", "2")
    command, _ = one(Q.complete(job, result), b"OK")
    assert command[:4] == ("EMQ.COMPLETE", b"mail", b"7", b"2")
    assert command[4:] == (() if sent is None else ("RESULT", sent))
    assert result_bytes(result) == sent


def test_fail_options_and_verdict() -> None:
    job = Job("7", b"", "2")
    command, verdict = one(Q.fail(job, "ValueError: x", max_attempts=1, backoff_ms=0),
                           [b"dead", 1])
    assert command == ("EMQ.FAIL", b"mail", b"7", b"2", "ERROR", "ValueError: x",
                       "MAXATTEMPTS", 1, "BACKOFF", 0)
    assert verdict.dead and verdict.failures == 1
    command, verdict = one(Q.fail(job), [b"scheduled", 2])
    assert command == ("EMQ.FAIL", b"mail", b"7", b"2")
    assert not verdict.dead and verdict.failures == 2


def test_requeue_and_extend() -> None:
    job = Job("7", b"", "3")
    assert one(Q.requeue(job), b"OK")[0] == ("EMQ.REQUEUE", b"mail", b"7", b"3")
    command, deadline = one(Q.extend(job, 900), 1700000000900)
    assert command == ("EMQ.EXTEND", b"mail", b"7", b"3", 900)
    assert deadline == 1700000000900


@pytest.mark.parametrize("reply", [
    [b"state", b"dead", b"payload", b"{}", b"attempts", b"2", b"failures", b"3",
     b"last_error", b"ValueError: x"],
    {b"state": b"dead", b"payload": b"{}", b"attempts": b"2", b"failures": b"3",
     b"last_error": b"ValueError: x"},
])
def test_get_reads_resp2_and_resp3_rows(reply: Any) -> None:
    command, info = one(Q.get("9"), reply)
    assert command == ("EMQ.GET", b"mail", b"9")
    assert (info.id, info.state, info.payload) == ("9", "dead", b"{}")
    assert (info.attempts, info.failures, info.stalled) == (2, 3, 0)
    assert info.last_error == "ValueError: x" and info.result is None
    assert info.json() == {}
    assert one(Q.get("9"), None)[1] is None


def test_stats_in_resp2_and_resp3() -> None:
    flat = [b"pending", 3, b"active", 1, b"scheduled", 0, b"dead", 2, b"completed", 5,
            b"completed_total", 9, b"failed_total", 2, b"trimmed_dead", 0, b"paused", 1,
            b"waiting", 4]
    expected = Stats(3, 1, 0, 2, 5, 9, 2, 0, 1, 4)
    assert one(Q.stats(), flat) == (("EMQ.STATS", b"mail"), expected)
    as_map = dict(zip(flat[::2], flat[1::2], strict=True))
    assert one(Q.stats(), as_map)[1] == expected


def test_dead_is_zrange_then_rows_in_one_batch_skipping_vanished_rows() -> None:
    sent, infos = drive(Q.dead(10, 3), [[b"4", b"5", b"6"]],
                        [[b"state", b"dead", b"payload", b"a"], None,
                         [b"state", b"dead", b"payload", b"c"]])
    assert sent[0] == [("ZRANGE", b"emq:{mail}:dead", 10, 12)]
    assert sent[1] == [("EMQ.GET", b"mail", b"4"), ("EMQ.GET", b"mail", b"5"),
                       ("EMQ.GET", b"mail", b"6")]
    assert [(i.id, i.payload) for i in infos] == [("4", b"a"), ("6", b"c")]
    sent, infos = drive(Q.dead(), [[]])
    assert (sent, infos) == ([[("ZRANGE", b"emq:{mail}:dead", 0, 99)]], [])


def test_steering_commands() -> None:
    assert one(Q.revive("3"), b"OK")[0] == ("EMQ.REVIVE", b"mail", b"3")
    assert one(Q.revive("3", reset=True), b"OK")[0] == ("EMQ.REVIVE", b"mail", b"3", "RESET")
    assert one(Q.remove("3"), 1) == (("EMQ.REMOVE", b"mail", b"3"), True)
    assert one(Q.remove("3"), 0)[1] is False
    assert one(Q.pause(), b"OK")[0] == ("EMQ.PAUSE", b"mail")
    assert one(Q.resume(), b"OK")[0] == ("EMQ.RESUME", b"mail")


def test_error_replies_become_the_client_classes() -> None:
    job = Job("7", b"", "2")
    with pytest.raises(StaleJob, match="token mismatch"):
        one(Q.complete(job), ResponseError("EMQSTALE token mismatch"))
    with pytest.raises(JobStateError, match="not dead"):
        one(Q.revive("7"), ResponseError("EMQSTATE job is not dead"))
    plain = ResponseError("syntax error")
    assert translate(plain) is plain
    assert isinstance(translate(ResponseError("EMQSTALE job gone")), ResponseError)


def test_queue_names_with_braces_are_refused() -> None:
    for bad in ("", "a{b", "a}", b"", b"a{", b"x" * 257, "é" * 129):
        with pytest.raises(ValueError):
            QueueCommands(bad)


def test_a_queue_name_may_be_bytes_even_not_utf8() -> None:
    """Bytes names used to raise TypeError."""
    queue = QueueCommands(b"mail\xff")
    assert queue.name == "mail\udcff"  # shown as text, sent as the same bytes
    command, _ = one(queue.add(b"x"), b"1")
    assert command[:3] == ("EMQ.ADD", b"mail\xff", b"x")
    sent, _ = drive(queue.dead(), [[]])
    assert sent == [[("ZRANGE", b"emq:{mail\xff}:dead", 0, 99)]]


@pytest.mark.parametrize("reply", [
    [b"max_attempts", b"3", b"backoff", b"fixed:1000"],
    {b"max_attempts": b"3", b"backoff": b"fixed:1000"},
])
def test_get_config_reads_every_setting_or_one(reply: Any) -> None:
    command, settings = one(Q.get_config(), reply)
    assert command == ("EMQ.CONFIG", b"mail", "GET")
    assert settings == {"max_attempts": "3", "backoff": "fixed:1000"}
    assert one(Q.get_config("backoff"), b"exp:1:2") == (
        ("EMQ.CONFIG", b"mail", "GET", "backoff"), "exp:1:2")


def test_set_config_sends_every_pair_in_one_command() -> None:
    command, _ = one(Q.set_config(max_attempts=5, backoff="exp:100:60000"), b"OK")
    assert command == ("EMQ.CONFIG", b"mail", "SET", "max_attempts", 5, "backoff", "exp:100:60000")
    with pytest.raises(ValueError):
        next(Q.set_config())
    with pytest.raises(ResponseError, match="unknown field"):
        one(Q.set_config(nope=1), ResponseError("ERR unknown field 'nope'"))


@pytest.mark.parametrize("reply", [
    [b"acme", [2, 1], b"beta", [0, 1]], {b"acme": [2, 1], b"beta": [0, 1]},
])
def test_lanes_and_their_limits(reply: Any) -> None:
    command, lanes = one(Q.lanes(), reply)
    assert command == ("EMQ.LANES", b"mail")
    assert lanes == {"acme": Lane(pending=2, active=1), "beta": Lane(pending=0, active=1)}
    assert one(Q.set_lane_limit("acme", 2), b"OK")[0] == ("EMQ.LANE.LIMIT", b"mail", b"acme", 2)


def test_queues_and_promote() -> None:
    assert one(Q.queues(), [b"mail", b"reports"]) == (("EMQ.QUEUES",), ["mail", "reports"])
    assert one(Q.promote(), 3) == (("EMQ.PROMOTE", b"mail"), 3)
    assert one(Q.promote(limit=10), 0) == (("EMQ.PROMOTE", b"mail", "LIMIT", 10), 0)


def test_job_info_exposes_raw_fields() -> None:
    info = JobInfo.from_row("1", [b"state", b"completed", b"result", b"42", b"priority", b"-3"])
    assert info.result == b"42" and info.number("priority") == -3
    assert info.number("max_attempts") is None


# --- issue 13: waiting, logs, progress, events ------------------------------------------------
def test_wait_reads_both_endings_and_the_timeout() -> None:
    assert one(Q.wait("7", 500), [b"completed", b"42"]) == (
        ("EMQ.WAIT", b"mail", b"7", 500), Finished("7", "completed", result=b"42"))
    _, dead = one(Q.wait("7"), [b"dead", b"boom"])
    assert dead == Finished("7", "dead", error="boom") and dead.dead and not dead.completed
    assert one(Q.wait("7"), [b"completed", None])[1].result is None
    assert one(Q.wait("7", 10), None)[1] is None
    with pytest.raises(ResponseError, match="no such job"):
        one(Q.wait("7"), ResponseError("no such job"))


def test_add_and_wait_is_add_then_wait_for_that_id() -> None:
    sent, result = drive(Q.add_and_wait({"n": 1}, timeout_ms=100, priority=2), [b"9"],
                         [[b"completed", b"done"]])
    picked, add = unnamed(sent[0][0])
    assert add == ("EMQ.ADD", b"mail", b'{"n":1}', "PRIORITY", 2)
    (wait,) = sent[1]
    assert wait[:3] == ("EMQ.WAIT", b"mail", b"9") and 90 <= wait[3] <= 100  # the time left
    assert result == b"done"
    with pytest.raises(JobDead) as dead:
        drive(Q.add_and_wait(b"x", timeout_ms=0), [b"9"], [[b"dead", b"boom"]])
    assert (dead.value.job_id, dead.value.error) == ("9", "boom")
    with pytest.raises(WaitTimeout) as late:
        drive(Q.add_and_wait(b"x", timeout_ms=5), [b"9"], [None])
    assert late.value.job_id == "9" and isinstance(late.value, TimeoutError)


def test_a_wait_sent_again_asks_for_the_time_left_and_a_lost_one_names_its_job() -> None:
    """What the drivers do with a `Retried` batch (queue.py): `again()` for the next try,
    and once their patience is spent the error thrown in, which names the job."""
    operation = Q.wait("9", 10_000)
    batch = next(operation)
    assert batch[0][3] == 10_000 or batch[0][3] == 9_999
    time.sleep(0.05)
    assert batch.again()[0][3] <= 9_950
    with pytest.raises(ConnectionLost) as lost:
        operation.throw(RedisConnectionError("gone"))
    assert (lost.value.job_id, lost.value.added) == ("9", True)
    adding = Q.add_and_wait(b"x", timeout_ms=0)
    picked = unnamed(next(adding)[0])[0]
    with pytest.raises(ConnectionLost) as unsure:
        adding.throw(RedisConnectionError("gone"))
    assert (unsure.value.job_id, unsure.value.added) == (picked, False)
    assert isinstance(unsure.value, RedisConnectionError)  # caught where those are


def test_logs_progress_and_log() -> None:
    assert one(Q.logs("7"), [b"a", b"\xff"]) == (("EMQ.LOGS", b"mail", b"7"), ["a", "\udcff"])
    assert one(Q.logs("7", start=2, count=5), [])[0] == (
        "EMQ.LOGS", b"mail", b"7", "START", 2, "COUNT", 5)
    job = Job("7", b"", "3")
    assert one(Q.progress(job, 50), b"OK")[0] == ("EMQ.PROGRESS", b"mail", b"7", b"3", b"50")
    assert one(Q.progress(job, {"pct": 5}), b"OK")[0][-1] == b'{"pct":5}'
    assert one(Q.progress(job, "half"), b"OK")[0][-1] == b"half"
    assert one(Q.log(job, "step 1"), 4) == (("EMQ.LOG", b"mail", b"7", b"3", b"step 1"), 4)
    with pytest.raises(StaleJob):
        one(Q.log(job, "x"), ResponseError("EMQSTALE token mismatch"))


def test_queue_events_parse_into_name_id_ts_and_fields() -> None:
    assert Q.events_channel == b"emq:{mail}:events"
    event = QueueEvent.parse(b'{"event":"claimed","id":"4","ts":17,"token":"2","wait_ms":3}')
    assert event == QueueEvent("claimed", "4", 17, {"token": "2", "wait_ms": 3})
    assert QueueEvent.parse('{"event":"paused","ts":18}') == QueueEvent("paused", None, 18, {})


# --- issue 14: unique jobs, flows, schedules, rate limits ------------------------------------
def test_add_unique_says_whether_it_added() -> None:
    command, added = one(Q.add_unique(b"x", "ada", ttl_ms=500, priority=2), [b"4", b"added"])
    assert unnamed(command)[1] == ("EMQ.ADD", b"mail", b"x", "PRIORITY", 2, "UNIQUE", b"ada",
                                   "TTL", 500)
    assert added == Added("4", True)
    assert one(Q.add_unique(b"x", b"ada"), [b"4", b"exists"])[1] == Added("4", False, "exists")
    assert one(Q.add(b"x", unique="ada"), [b"4", b"exists"])[1] == "4"
    with pytest.raises(ValueError, match="need unique"):
        next(Q.add(b"x", unique_ttl_ms=5))


def test_flow_builds_one_command_and_reads_its_ids() -> None:
    children = [Child("fetch", b"a", group="g"), Child("fetch", {"n": 1}, on_child_fail="ignore"),
                Child("mail", "b", under=2, id="m1")]
    command, made = one(Q.flow(b"p", children, on_child_fail="remove", priority=1),
                        [b"1", [b"1", b"2", b"m1"]])
    parent, command = unnamed(command)
    assert command == ("EMQ.FLOW", b"mail", b"p", "PRIORITY", 1, "ONCHILDFAIL", "remove",
                       "CHILD", b"fetch", b"a", "GROUP", b"g",
                       "CHILD", b"fetch", b'{"n":1}', "ONCHILDFAIL", "ignore",
                       "CHILD", b"mail", b"b", "ID", b"m1", "UNDER", 2)
    assert made == Flow("1", ["1", "2", "m1"])
    with pytest.raises(ValueError, match="at least one child"):
        next(Q.flow(b"p", []))


def test_children_reads_states_and_results() -> None:
    reply = [[b"fetch", b"1", b"completed", b"r"], [b"fetch", b"2", b"pending", None]]
    command, listed = one(Q.children("9"), reply)
    assert command == ("EMQ.CHILDREN", b"mail", b"9")
    assert listed == [ChildInfo("fetch", "1", "completed", b"r"),
                      ChildInfo("fetch", "2", "pending", None)]
    assert one(Q.children("9"), None)[1] is None


def test_repeat_and_its_listing() -> None:
    assert one(Q.repeat("tick", b"x", every_ms=1000, priority=2), 5000) == (
        ("EMQ.REPEAT", b"mail", b"tick", "EVERY", 1000, b"x", "PRIORITY", 2), 5000)
    command, _ = one(Q.repeat("d", {"a": 1}, cron="0 8 * * 1", tz="Europe/Paris"), 7)
    assert command == ("EMQ.REPEAT", b"mail", b"d", "CRON", "0 8 * * 1", "TZ", "Europe/Paris",
                       b'{"a":1}')
    for bad in ({}, {"every_ms": 1, "cron": "* * * * *"}, {"every_ms": 1, "tz": "UTC"}):
        with pytest.raises(ValueError):
            next(Q.repeat("n", b"x", **bad))
    with pytest.raises(TypeError, match="delay_ms"):
        next(Q.repeat("n", b"x", every_ms=1, delay_ms=5))
    flat = [b"name", b"tick", b"next_ms", 5000, b"every", 1000, b"payload", b"x",
            b"priority", b"2"]
    assert one(Q.repeats(), [flat])[1] == [Schedule("tick", 5000, b"x", every_ms=1000,
                                                    options={"priority": "2"})]
    assert one(Q.delete_repeat("tick"), 1) == (("EMQ.REPEAT.DEL", b"mail", b"tick"), True)


def test_rate_limits() -> None:
    assert one(Q.set_rate(10, 1000), b"OK")[0] == ("EMQ.RATE", b"mail", 10, 1000)
    assert one(Q.clear_rate(), b"OK")[0] == ("EMQ.RATE", b"mail", "OFF")
    assert one(Q.set_lane_rate("g", 2, 500), b"OK")[0] == ("EMQ.LANE.RATE", b"mail", b"g", 2, 500)
    assert one(Q.clear_lane_rate("g"), b"OK")[0] == ("EMQ.LANE.RATE", b"mail", b"g", "OFF")
