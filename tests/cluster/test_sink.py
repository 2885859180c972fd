"""The cluster sink without a cluster (emqd/cluster/sink.py): the records of a queue as the
APPLY script's ops, settled out of order, in flight in order, and failed together.

The sink's records must be the plan's ops exactly: what the APPLY script runs
(each op's count, then its arguments) is decoded here and compared with the
ops, for Shape plans and generic ones, against the same ops' log record.
"""

from __future__ import annotations

import asyncio
import time

import hiredis

from emqd.cluster.nodes import NodeError, Topology
from emqd.cluster.sink import RECHECK_MS, Batch, ClusterSink, QueueLog
from emqd.commit.plan import Plan, Shape, Slot
from emqd.persist.records import text
from emqd.persist.values import items_of
from emqd.store.keyspace import Keyspace
from emqd.verbs import add


def decode_ops(batch: Batch) -> list[tuple[bytes, ...]]:
    """The ops the APPLY script would run: ARGV from position 3 on (count, arguments)."""
    reader = hiredis.Reader()
    args = b"".join(batch.parts)
    reader.feed(b"*%d\r\n" % batch.count + args)
    flat = reader.gets()
    ops, at = [], 0
    while at < len(flat):
        count = int(flat[at])
        ops.append(tuple(flat[at + 1:at + 1 + count]))
        at += count + 1
    return ops


def sink_with(*queues: bytes) -> ClusterSink:
    sink = ClusterSink(Topology([], 1.0), None, 1000, lambda queue: None, lambda queue: [])
    for name in queues:
        sink.logs[name] = QueueLog(name, b"term 127.0.0.1:1", 0)
    return sink


SHAPE = Shape("test", (b"HSET", Slot("row"), b"state", Slot("state")),
              (b"ZADD", Slot("set"), Slot("score"), Slot("id")))


def test_a_shape_s_arguments_and_a_generic_op_s_are_the_plan_s_ops() -> None:
    sink = sink_with(b"q")
    shaped = Plan(SHAPE.ops(b"emq:{q}:job:1", b"pending", b"emq:{q}:pending", b"7", b"1"),
                  shape=SHAPE)
    generic = Plan([(b"HINCRBY", b"emq:{q}:meta", b"n", 5), (b"DEL", b"emq:{q}:x"),
                    (b"ZADD", b"emq:{q}:z", 1.5, b"m")])
    sink.append(shaped)
    sink.append(generic)
    batch = sink.logs[b"q"].filling
    assert batch is not None and batch.records == [1, 2]
    expected = [tuple(text(v) for v in op) for op in shaped.ops + generic.ops]
    assert decode_ops(batch) == expected


def _applied(ops: list[tuple[bytes, ...]]) -> dict[bytes, object]:
    """Each key `ops` leave, as (is a sorted set, its fields or members as a dict)."""
    space = Keyspace()
    space.apply(ops)
    return {key: (is_zset, dict(items)) for key, value in space.data.items()
            for is_zset, items in [items_of(value, copy=True)]}


def test_an_hset_a_later_one_of_the_batch_overwrites_is_left_out() -> None:
    """Three ADDs' Shapes in one batch: `meta` is written once (the last), each row and
    ZADD stays, and the batch leaves the store as all the ops would; a plan that is not
    a Shape's ends the run (the HSET before it stays)."""
    sink = sink_with(b"q")
    plans = [Plan(add.PLAIN.ops(b"emq:{q}:job:%d" % i, b"p", b"5", b"emq:{q}:pending", b"%d" % i,
                                b"%d" % i, b"emq:{q}:meta", b"%d" % i), shape=add.PLAIN)
             for i in (1, 2, 3)]
    for plan in plans:
        assert sink.refusal(plan) is None
        sink.append(plan)
    batch = sink.logs[b"q"].filling
    assert batch is not None
    sent = decode_ops(batch)
    every = [tuple(text(v) for v in op) for plan in plans for op in plan.ops]
    assert [op for op in sent if op[1] == b"emq:{q}:meta"] == \
        [(b"HSET", b"emq:{q}:meta", b"seq", b"3", b"added", b"3")]
    assert len(sent) == len(every) - 2
    assert _applied(sent) == _applied(every)
    sink.append(Plan([(b"HINCRBY", b"emq:{q}:meta", b"added", 1)]))
    last = Plan(add.PLAIN.ops(b"emq:{q}:job:4", b"p", b"5", b"emq:{q}:pending", b"4", b"4",
                              b"emq:{q}:meta", b"4"), shape=add.PLAIN)
    assert sink.refusal(last) is None
    sink.append(last)
    metas = [op for op in decode_ops(batch) if op[1] == b"emq:{q}:meta"]
    assert [op[0] for op in metas] == [b"HSET", b"HINCRBY", b"HSET"]


def test_the_registry_is_written_apart_and_a_plan_of_other_keys_is_refused() -> None:
    sink = sink_with(b"q")
    plan = Plan([(b"HSET", b"emq:{q}:job:1", b"state", b"pending"),
                 (b"ZADD", b"emq:queues", 12, b"q")])
    assert sink.refusal(plan) is None
    sink.append(plan)
    batch = sink.logs[b"q"].filling
    assert batch is not None and decode_ops(batch) == [(b"HSET", b"emq:{q}:job:1", b"state",
                                                       b"pending")]
    assert sink.registry == {b"q": b"12"}
    crossed = sink.refusal(Plan([(b"HSET", b"emq:{q}:a", b"f", b"v"),
                                 (b"HSET", b"emq:{r}:a", b"f", b"v")]))
    assert crossed is not None and crossed.message.startswith(b"CROSSSLOT")
    assert sink.refusal(Plan([(b"FLUSHALL",)])) is not None
    not_ours = sink.refusal(Plan([(b"HSET", b"emq:{r}:a", b"f", b"v")]))
    assert not_ours is not None and not_ours.message.startswith(b"TRYAGAIN")
    for bookkeeping in (Plan([(b"DEL", b"emq:{q}:job:1", b"emq:{q}:owner")]),
                        Plan([(b"HSET", b"emq:{q}:written", b"f", b"v")])):
        refused = sink.refusal(bookkeeping)  # the lease and the batch count: never a client's
        assert refused is not None and b"bookkeeping" in refused.message


def test_records_settle_out_of_order_and_the_watermark_follows() -> None:
    sink = sink_with(b"q")
    sink.appended = 5
    sink._settle([2, 3], failed=False)
    assert sink.durable == 0 and sink.resolved(3) and not sink.resolved(1)
    sink._settle([1], failed=True)
    assert sink.durable == 3 and sink.take_failed() == [1] and sink.take_failed() == []
    sink._settle([5, 4], failed=False)
    assert sink.durable == 5


def test_a_batch_the_store_held_holds_the_stall_sweep_as_long_again() -> None:
    """While a queue's batch has been on its way SLOW_S or more, its sweep looks again
    later; once acknowledged after T seconds, the sweep waits T more. A quick batch, or a
    queue this front does not hold, holds nothing."""
    sink = sink_with(b"q")
    queue_log = sink.logs[b"q"]
    assert sink.sweep_delay_ms(b"q") == 0 and sink.sweep_delay_ms(b"other") == 0
    slow = Batch()
    slow.sent_at = time.monotonic() - 2.0
    queue_log.inflight = [slow]
    assert sink.sweep_delay_ms(b"q") == RECHECK_MS
    sink.answered(queue_log, slow, queue_log.wire, 1, True)
    assert queue_log.inflight == []
    assert 1_800 <= sink.sweep_delay_ms(b"q") <= 2_000
    queue_log.grace_until = 0.0
    quick = Batch()
    quick.sent_at = time.monotonic()
    queue_log.inflight = [quick]
    assert sink.sweep_delay_ms(b"q") == 0  # on its way, but not slow
    sink.answered(queue_log, quick, queue_log.wire, 1, True)
    assert sink.sweep_delay_ms(b"q") == 0


def test_answers_to_batches_in_flight_count_in_order_and_a_failure_takes_the_later_along(
) -> None:
    """Two batches of a queue on their way: an answer for the second before the first's
    is not taken; the first acknowledged, the second becomes the oldest; a failure of
    the oldest pauses the queue and makes the answers of that sending stale (the later
    batch is sent again behind it, not written back on its own EMQGAP)."""
    async def run() -> None:
        sink = sink_with(b"q")
        queue_log = sink.logs[b"q"]
        first, second, third = Batch(), Batch(), Batch()
        first.records, second.records, third.records = [1], [2], [3]
        first.sent_at = second.sent_at = third.sent_at = time.monotonic()
        sink.appended = 3
        queue_log.inflight = [first, second]
        wire = queue_log.wire
        sink.answered(queue_log, second, wire, 1, True)  # not the oldest: not taken
        assert queue_log.inflight == [first, second] and sink.durable == 0
        sink.answered(queue_log, first, wire, 1, True)
        assert queue_log.inflight == [second] and sink.durable == 1
        queue_log.inflight.append(third)
        sink.answered(queue_log, second, wire, ConnectionError("lost"), False)
        assert queue_log.paused and queue_log.wire == wire + 1
        assert queue_log.inflight == [second, third] and sink.durable == 1
        sink.answered(queue_log, third, wire, NodeError("EMQGAP the cluster holds 1"), True)
        assert queue_log.inflight == [second, third]  # stale: no write-back started
        assert not sink._may_send(queue_log)  # paused until the retry
        assert sink.take_failed() == []

    asyncio.run(run())


def shapes() -> list[Shape]:
    """Every Shape the verbs declare (module constants, alone or in tables)."""
    import sys

    import emqd.dispatch  # noqa: F401  (imports every verb)

    found: dict[int, Shape] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("emqd.verbs"):
            continue
        for value in vars(module).values():
            for item in value.values() if isinstance(value, dict) else [value]:
                if isinstance(item, Shape):
                    found[id(item)] = item
    return list(found.values())


def test_every_verb_shape_s_arguments_are_the_ops_its_log_record_holds() -> None:
    assert len(shapes()) > 20
    for shape in shapes():
        values = [b"v%d" % i for i in range(shape.ops.__code__.co_argcount)]
        ops = shape.ops(*values)
        batch = Batch()
        batch.add_shaped(shape, ops)
        assert decode_ops(batch) == [tuple(text(v) for v in op) for op in ops], shape


def test_a_queue_let_go_fails_its_writes_and_has_the_commit_path_answer_at_once() -> None:
    """A lease that ran out drops the queue outside any write of the front's: unless the
    commit path is told, what waited for the queue's writes waited for the next flush,
    which a front cut off from the cluster never had (a CLAIM held 120 s)."""
    sink = sink_with(b"q", b"idle")
    told: list[int] = []
    sink.attach(lambda: told.append(1))
    batch = Batch()
    batch.records = [1]
    sink.appended = 1
    sink.logs[b"q"].inflight = [batch]
    sink.disown(b"q")
    assert told == [1] and sink.take_failed() == [1] and sink.resolved(1)
    sink.disown(b"idle")  # nothing on its way: nothing to tell
    assert told == [1]
