"""The commit path (emqd/commit/path.py): applied, kept as one record, then answered in order.

Driven through its real objects: a `Server` built in process with a sink that keeps
its records until the test says they are durable (as a remote store acknowledges
later), and real connections over recording transports as the outlets. No loop
runs, so `schedule_flush` flushes at once and each step's outcome is visible.
"""

from __future__ import annotations

import pytest

from emqd.commit.events import Event
from emqd.commit.plan import Plan
from emqd.commit.sink import Sink
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.serve.lifecycle import Server
from emqd.store import hash as hashes
from tests.transports import connection

EVENT_A: Event = ("completed", b"q", b"1", 5, None)
EVENT_B: Event = ("claimed", b"q", b"2", 6, None)


class AckedSink(Sink):
    """Records kept in memory, durable only once the test acknowledges them (`kept`);
    `failed` names the records it lost for good when `fallible`; `refuse` refuses
    every plan (`checks_plans`)."""

    def __init__(self, fallible: bool = False) -> None:
        super().__init__()
        self.records: list[list[Plan]] = []
        self.kept = 0
        self.fallible = fallible
        self.failed: list[int] = []
        self.lost: set[int] = set()
        self.checks_plans = True
        self.refuse: ReplyError | None = None

    @property
    def durable(self) -> int:
        return self.kept

    def refusal(self, plan: Plan) -> ReplyError | None:
        return self.refuse

    def append(self, plan: Plan) -> None:
        self.records.append([plan])
        self.appended += 1

    def append_batch(self, plans: list[Plan]) -> None:
        self.records.append(list(plans))
        self.appended += 1

    def resolved(self, offset: int) -> bool:
        return offset <= self.kept or offset in self.lost

    def lose(self, offset: int) -> None:
        self.failed.append(offset)
        self.lost.add(offset)

    def take_failed(self) -> list[int]:
        taken, self.failed = self.failed, []
        return taken

    def write_now(self) -> bool:
        return False  # a remote store cannot be made to answer now


def hset(key: bytes, value: bytes = b"v", events: list[Event] | None = None) -> Plan:
    return Plan([(b"HSET", key, b"f", value)], "OK", events)


def stored(server: Server, key: bytes) -> dict[bytes, bytes] | None:
    found = server.core.keyspace.hash(key)
    return None if found is None else hashes.as_dict(found)


def test_a_write_is_applied_kept_as_one_record_and_answered_once_durable() -> None:
    sink = AckedSink()
    server = Server(Config(), sink=sink)
    sent: list = []
    conn = connection(server, sent, "c")
    commit = server.commit
    plan = hset(b"h")
    offset = commit.apply(plan)
    assert stored(server, b"h") == {b"f": b"v"}  # applied at once
    assert (offset, sink.records) == (1, [[plan]])
    commit.send(conn, b"+OK\r\n", offset)
    commit.send(conn, b"+PONG\r\n", 0)  # needs nothing, but its client's reply waits before it
    assert sent == [] and conn.holding == 2
    commit.flush()
    assert sent == []  # the sink has not acknowledged it
    sink.kept = 1
    commit.flush()
    assert sent == [("c", b"+OK\r\n"), ("c", b"+PONG\r\n")] and conn.holding == 0


def test_another_clients_read_does_not_wait_for_a_write_it_does_not_tell_of() -> None:
    sink = AckedSink()
    server = Server(Config(), sink=sink)
    sent: list = []
    writer, reader = connection(server, sent, "writer"), connection(server, sent, "reader")
    server.commit.send(writer, b"+OK\r\n", server.commit.apply(hset(b"h")))
    server.commit.send(reader, b"+PONG\r\n", 0)
    assert sent == [("reader", b"+PONG\r\n")]


def test_under_a_strict_sink_every_output_waits_for_every_record_before_it() -> None:
    sink = AckedSink()
    sink.strict = True
    server = Server(Config(), sink=sink)
    sent: list = []
    writer, reader = connection(server, sent, "writer"), connection(server, sent, "reader")
    server.commit.apply(hset(b"h"))
    server.commit.send(reader, b"$1\r\nv\r\n", 0)  # a read of what the sink could still lose
    assert sent == []
    sink.kept = 1
    server.commit.flush()
    assert sent == [("reader", b"$1\r\nv\r\n")]
    assert writer.holding == 0


def test_a_plan_the_sink_refuses_changes_nothing() -> None:
    sink = AckedSink()
    server = Server(Config(), sink=sink)
    heard: list = []
    server.commit.listen(heard.append)
    sink.refuse = ReplyError("CROSSSLOT Keys in request don't hash to the same slot")
    with pytest.raises(ReplyError, match="CROSSSLOT"):
        server.commit.apply(hset(b"h", events=[EVENT_A]))
    assert stored(server, b"h") is None
    assert (sink.records, sink.appended, heard, server.commit.dirty) == ([], 0, [], 0)


def test_an_exec_is_one_record_and_its_events_are_told_at_its_end_in_order() -> None:
    sink = AckedSink()
    server = Server(Config(), sink=sink)
    heard: list = []
    commit = server.commit
    commit.listen(heard.append)
    first, second = hset(b"a", events=[EVENT_A]), hset(b"b", events=[EVENT_B])
    commit.begin_batch()
    assert commit.apply(first) == 0 and commit.apply(second) == 0
    assert stored(server, b"a") == {b"f": b"v"} and stored(server, b"b") == {b"f": b"v"}
    assert heard == [] and sink.records == []  # nothing told before the sink has it
    assert commit.end_batch() == 1
    assert sink.records == [[first, second]]
    assert heard == [[EVENT_A], [EVENT_B]]


def test_a_record_a_fallible_sink_lost_is_answered_by_what_was_given_instead() -> None:
    sink = AckedSink(fallible=True)
    server = Server(Config(), sink=sink)
    sent: list = []
    writer, listener = connection(server, sent, "writer"), connection(server, sent, "listener")
    commit = server.commit
    lost = commit.apply(hset(b"h"))
    commit.send(writer, b"+OK\r\n", lost, own=lost, instead=b"-TRYAGAIN\r\n")
    commit.send(listener, b"message", lost, own=lost)  # a message about it: nothing instead
    kept = commit.apply(hset(b"k"))
    commit.send(writer, b"+OK\r\n", kept, own=kept, instead=b"-TRYAGAIN\r\n")
    assert sent == []
    sink.lose(lost)
    sink.kept = kept  # the next record is kept: a remote sink settles out of order
    commit.flush()
    assert sent == [("writer", b"-TRYAGAIN\r\n+OK\r\n")]  # in order, gathered into one write
    assert writer.holding == 0 and listener.holding == 0


def test_without_a_log_nothing_is_held_and_no_offset_is_waited_for() -> None:
    server = Server(Config())  # NullSink: --appendonly no
    sent: list = []
    conn = connection(server, sent, "c")
    assert server.commit.apply(hset(b"h")) == 0
    assert server.commit.sink.appended == 0
    server.commit.send(conn, b"+OK\r\n", 5)
    assert sent == [("c", b"+OK\r\n")] and conn.holding == 0
