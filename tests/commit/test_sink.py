"""The sink interface (emqd/commit/sink.py): what a sink that needs nothing more inherits, and
`NullSink`, which the commit path passes over.

A sink that adds only `append` (the log under `--appendfsync` with a synchronous
write, the tests' RecordingLog) relies on these defaults: every record durable once
appended, a flush that has nothing to wait for, nothing ever lost, and a save that
fails while the sink cannot keep records.
"""

from __future__ import annotations

import pytest

from emqd.commit.plan import Plan
from emqd.commit.sink import NullSink, Sink
from emqd.config import Config
from emqd.serve.lifecycle import Server
from tests.support import RecordingLog
from tests.transports import connection


def test_a_plain_sink_holds_each_record_durably_once_appended() -> None:
    sink = RecordingLog()
    assert sink.keeps and not sink.fallible and not sink.strict and not sink.checks_plans
    sink.append(Plan([(b"HSET", b"h", b"f", b"v")]))
    assert sink.appended == 1 and sink.durable == 1
    assert sink.write_now() and sink.flush()
    assert sink.resolved(1) and not sink.resolved(2)  # a record not appended is not settled
    assert sink.take_failed() == []
    assert sink.refusal(Plan([(b"HSET", b"h", b"f", b"v")])) is None


def test_a_failing_sink_saves_nothing_and_asks_for_a_flush_when_attached() -> None:
    sink = RecordingLog()
    sink.failing = OSError(28, "No space left on device")
    asked: list[str] = []
    sink.attach(lambda: asked.append("flush"))
    assert asked == ["flush"]  # at once: the commit path must arm its retry
    assert not sink.save() and not sink.close()
    sink.failing = None
    assert sink.save() and sink.close()


def test_a_healthy_sink_asks_for_nothing_when_attached() -> None:
    sink = Sink()
    asked: list[str] = []
    sink.attach(lambda: asked.append("flush"))
    assert asked == []
    sink.notify()
    assert asked == ["flush"]  # the commit path's notify is the one it keeps


def test_null_sink_keeps_nothing_and_the_commit_path_passes_it_over() -> None:
    sink = NullSink()
    assert not sink.keeps
    server = Server(Config(), sink=sink)
    sent: list = []
    conn = connection(server, sent, "c")
    assert server.commit.apply(Plan([(b"HSET", b"h", b"f", b"v")])) == 0
    assert sink.appended == 0  # not even counted
    server.commit.send(conn, b"+OK\r\n", 1)
    assert sent == [("c", b"+OK\r\n")]


@pytest.mark.parametrize("plans", [1, 3])
def test_an_exec_is_appended_as_one_record(plans: int) -> None:
    sink = RecordingLog()
    server = Server(Config(), sink=sink)
    server.commit.begin_batch()
    for i in range(plans):
        server.commit.apply(Plan([(b"HSET", b"h%d" % i, b"f", b"v")]))
    assert server.commit.end_batch() == 1
    assert sink.appended == 1
    assert sink.records == [[(b"HSET", b"h%d" % i, b"f", b"v") for i in range(plans)]]
