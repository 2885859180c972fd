"""The cluster sink: each loop iteration's plans of a queue, as one fenced script call.

The commit path (emqd/commit.py) hands this sink every committed plan as one
record (an offset: records are counted from 1). The records of a queue gather
in a batch; at the end of the loop iteration (`flush`) each queue's batch goes
to the primary of the queue's slot as one call of `scripts.APPLY`, which
applies its ops only if the queue's lease still holds this front's term, and
only once (the batch's number, checked against the queue's `written` key, makes
a retry after a lost answer harmless). The batches of all queues on one
primary travel in one pipeline on one connection, followed by `WAIT acks
timeout` when the queue's shard has replicas to wait for (`WAIT` counts the
writes of its own connection). A record is kept when its batch was applied
and acknowledged; only then does the commit path let its reply and events go.

Failures:
- a refused term (another front owns the queue now) fails the queue at once;
- a gap in the batch numbers means the cluster lost batches it had acknowledged
  (a failover to a replica that had not received them: `--cluster-acks 0`, or
  a primary restarted empty): the owner writes the whole queue back from
  memory (`_restore`: every key of the queue the cluster holds is deleted and
  the owner's written, as one RESTORE call behind the same term check), and
  carries on; the batch that found the gap, and the next, are in it;
- anything else (no primary during a failover, a moved slot, a connection
  that broke, too few replicas in time) is retried, on a fresh connection to
  the slot's primary of the moment, until `timeout_ms` after the first failure,
  then fails the queue.
A failed queue's records (and every later one of that queue: they were
planned on top of the lost ones) are reported to the commit path
(`take_failed`), which answers their writers with a retryable error, and the
front is told (`lost`), which drops the queue from memory; whoever owns it
next loads what the cluster holds.

Nothing here encodes a command argument by argument in Python's generic
packer: the ops come as RESP already, from the plan's Shape (`Shape.args`) or
persist/records.py's encoder, as the log's records do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisError, ResponseError

from emqd import errors
from emqd.cluster import scripts
from emqd.cluster.loader import keys_in_cluster
from emqd.cluster.names import REGISTRY, is_bookkeeping, owner_key, queue_of, written_key
from emqd.errors import ReplyError
from emqd.persist.records import append_command
from emqd.persist.rewrite import ITEMS_PER_COMMAND, append_value, items_of
from emqd.plan import Op, Plan, Shape
from emqd.sink import Sink

log = logging.getLogger("emqd")

WAIT_MS = 1000  # one WAIT's timeout; a shortfall is retried until the write times out
RETRY_FIRST_S = 0.05  # the first retry of a failed batch; doubled up to RETRY_MOST_S
RETRY_MOST_S = 0.5
# A batch unanswered this long means the store could not be written (a failover, a lost
# node): the stall sweep of its queue waits for it, then for as long again (`sweep_delay_ms`).
SLOW_S = 0.05
RECHECK_MS = 100  # how soon a sweep held by a batch still on its way looks again
CROSSSLOT = errors.Refusal("CROSSSLOT Keys in request don't hash to the same slot")
NOT_SERVED = errors.Refusal(
    "ERR cluster mode serves the queues' keys (emq:{QUEUE}:...) only; use the cluster "
    "directly for other keys")
NOT_FLUSHED = errors.Refusal(
    "ERR FLUSHALL and FLUSHDB are not served in cluster mode: flush the cluster itself, then "
    "restart the fronts")
NOT_OWNED = errors.Refusal("TRYAGAIN this front does not own the queue any more; retry")
BOOKKEEPING = errors.Refusal(
    "ERR a queue's owner and written keys are the cluster's bookkeeping of its owner and "
    "writes: not written by clients")
_FENCED = b"EMQFENCED"
_GAP = b"EMQGAP"


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(data), data)


_APPLY_HEAD = _bulk(b"EVAL") + _bulk(scripts.APPLY.encode()) + _bulk(b"2")
_RESTORE_HEAD = _bulk(b"EVAL") + _bulk(scripts.RESTORE.encode()) + _bulk(b"2")


class Batch:
    """Records of one queue, as the APPLY script's ops: encoded arguments and their count
    (`restore`: the whole queue instead, for RESTORE).

    Every op is a blind write, so an HSET that a later HSET of the same key and the
    same field names overwrites is left out (`merges`: where the last of each is in
    `parts`): a batch of 50 ADDs writes the queue's `meta` once, not 50 times, and
    the cluster's primary runs that much less. Only between ops of verbs' Shapes:
    any other plan (a plain HINCRBY, say) ends the run, since leaving out the HSET
    before it could change what it meets."""

    __slots__ = ("parts", "counts", "count", "merges", "records", "seq", "restore")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.counts: list[int] = []  # each part's arguments
        self.count = 0
        self.merges: dict[tuple[bytes, tuple[bytes, ...]], int] = {}
        self.records: list[int] = []
        self.seq = 0  # its number, once it is sent
        self.restore = False

    def add_shaped(self, shape: Shape, ops: list[Op]) -> None:
        """A verb's Shape's ops, each a part of its own."""
        runs = shape.op_args(ops)
        counts = shape.op_counts
        merged = shape.merged
        parts = self.parts
        for i in range(len(runs)):
            names = merged[i]
            if names is not None:
                slot = (ops[i][1], names)
                earlier = self.merges.get(slot)
                if earlier is not None:
                    parts[earlier] = b""
                    self.count -= self.counts[earlier]
                    self.counts[earlier] = 0
                self.merges[slot] = len(parts)
            parts.append(runs[i])
            self.counts.append(counts[i])
            self.count += counts[i]

    def restore_with(self, part: bytes, count: int) -> None:
        """Become the RESTORE of a whole queue (`part`: its ops, `count` arguments),
        keeping its records."""
        self.parts = [part]
        self.counts = [count]
        self.count = count
        self.merges.clear()
        self.restore = True

    def add_encoded(self, part: bytes, count: int) -> None:
        """Ops encoded apart (not a Shape's): they end the run of HSETs left out."""
        self.merges.clear()
        self.parts.append(part)
        self.counts.append(count)
        self.count += count


class QueueLog:
    """One owned queue's writes on their way to the cluster."""

    __slots__ = ("queue", "owner", "written", "filling", "sending", "failing_since", "slot",
                 "retries", "sent_at", "grace_until")

    def __init__(self, queue: bytes, owner: bytes, written: int) -> None:
        self.queue = queue
        self.owner = owner  # the owner key's value: the term and this front's address
        self.written = written  # the last batch number the cluster holds, as far as we know
        self.filling: Batch | None = None  # records of this loop iteration
        self.sending: Batch | None = None  # the batch on its way (or waiting to retry)
        self.failing_since: float | None = None  # monotonic: the first failure of `sending`
        self.slot = key_slot(owner_key(queue))
        self.retries = 0
        self.sent_at = 0.0  # monotonic: when `sending` was first sent
        self.grace_until = 0.0  # monotonic: the stall sweep waits until then (an outage's length)

    def command(self) -> bytes:
        """The APPLY call of the batch being sent, as RESP."""
        batch = self.sending
        assert batch is not None
        head = b"*%d\r\n" % (7 + batch.count) + (_RESTORE_HEAD if batch.restore else _APPLY_HEAD)
        return b"".join([head, _bulk(owner_key(self.queue)), _bulk(written_key(self.queue)),
                         _bulk(self.owner), _bulk(b"%d" % batch.seq), *batch.parts])


class ClusterSink(Sink):
    def __init__(self, client: RedisCluster, acks: int | None, timeout_ms: int,
                 lost: Callable[[bytes], None],
                 held: Callable[[bytes], list[tuple[bytes, Any]]]) -> None:
        super().__init__()
        self.fallible = True
        self.checks_plans = True
        self.client = client
        self.acks = acks  # None: 1 where the shard has a replica
        self.timeout_s = timeout_ms / 1000
        self.lost = lost  # the front drops a failed queue (front.py)
        self.held = held  # a queue's keys and values in the front's store, for `_restore`
        self.logs: dict[bytes, QueueLog] = {}
        self._durable = 0  # every record up to here is settled
        self.settled: set[int] = set()  # settled records above `_durable`
        self.failed: list[int] = []
        self.registry: dict[bytes, bytes] = {}  # queues to enter in the registry (ZADD NX)
        self.links: dict[str, NodeLink] = {}
        self._registering: asyncio.Task[None] | None = None
        self._topology: asyncio.Task[None] | None = None
        self._admitted: tuple[Plan, bytes] | None = None  # `refusal`'s last: the plan's queue

    # --- the queues this front owns --------------------------------------------------
    def own(self, queue: bytes, owner: bytes, written: int) -> None:
        """The front owns `queue` now, under the lease value `owner`; the cluster holds
        `written` batches of it."""
        self.logs[queue] = QueueLog(queue, owner, written)

    def disown(self, queue: bytes) -> None:
        """The front let `queue` go: its records not yet kept fail."""
        queue_log = self.logs.pop(queue, None)
        if queue_log is not None:
            for batch in (queue_log.sending, queue_log.filling):
                if batch is not None:
                    self._settle(batch.records, failed=True)

    # --- the commit path's side --------------------------------------------------------
    @property
    def durable(self) -> int:
        return self._durable

    def resolved(self, offset: int) -> bool:
        return offset <= self._durable or offset in self.settled

    def take_failed(self) -> list[int]:
        failed, self.failed = self.failed, []
        return failed

    def refusal(self, plan: Plan) -> ReplyError | None:
        """A plan is kept as one script call in one slot: its keys must all be one owned
        queue's (or the registry's, written apart). A verb's Shape is one queue's by
        construction: its first key names it. The queue found is kept for `append`."""
        ops = plan.ops
        if plan.shape is not None:
            queue = queue_of(ops[0][1])
            if queue is None or queue not in self.logs:
                return NOT_OWNED() if queue is not None else NOT_SERVED()
            self._admitted = (plan, queue)
            return None
        queue = None
        for op in ops:
            if len(op) < 2:
                return NOT_FLUSHED()  # FLUSHALL: the only op without a key
            keys = op[1:] if op[0] == b"DEL" else (op[1],)
            for key in keys:
                if key == REGISTRY:
                    continue
                owner = queue_of(key)
                if owner is None:
                    return NOT_SERVED()
                if is_bookkeeping(key, owner):
                    return BOOKKEEPING()  # a client's DEL of the lease would drop the queue
                if queue is None:
                    queue = owner
                elif owner != queue:
                    return CROSSSLOT()
        if queue is not None and queue not in self.logs:
            return NOT_OWNED()
        if queue is not None:
            self._admitted = (plan, queue)
        return None

    def append(self, plan: Plan) -> None:
        self.appended += 1
        self._add(plan.ops, plan, self.appended)

    def append_batch(self, plans: list[Plan]) -> None:
        self.appended += 1
        for plan in plans:
            self._add(plan.ops, plan, 0)
        self._record(self.appended, plans[0].ops if plans else [])

    def _add(self, ops: list[Op], plan: Plan, record: int) -> None:
        """Encode a plan's ops into its queue's batch; `record` (0: an EXEC's, noted by
        its caller) is the offset its batch settles."""
        shape = plan.shape
        admitted = self._admitted
        if shape is not None and admitted is not None and admitted[0] is plan:
            queue_log = self.logs[admitted[1]]  # a verb's Shape: one queue, no registry op
            batch = queue_log.filling
            if batch is None:
                batch = queue_log.filling = Batch()
            batch.add_shaped(shape, ops)
            if record:
                batch.records.append(record)
            return
        queue = None
        for op in ops:
            if op[1] == REGISTRY:
                self.registry[op[-1]] = op[-2] if type(op[-2]) is bytes else b"%d" % op[-2]
            elif queue is None:
                queue = queue_of(op[1])
        if queue is None:  # nothing of a queue: only the registry
            if record:
                self._settle([record], failed=False)
            return
        queue_log = self.logs[queue]
        batch = queue_log.filling
        if batch is None:
            batch = queue_log.filling = Batch()
        if shape is not None and all(op[1] != REGISTRY for op in ops):
            batch.add_shaped(shape, ops)
        else:
            out: list[bytes] = []
            count = 0
            for op in ops:
                if op[1] != REGISTRY:
                    append_command(op, out, counted=True)
                    count += len(op) + 1
            batch.add_encoded(b"".join(out), count)
        if record:
            batch.records.append(record)

    def _record(self, record: int, ops: list[Op]) -> None:
        """An EXEC's one record: its batch is its queue's (all its plans are one queue's:
        the router refuses an EXEC across queues)."""
        for op in ops:
            queue = queue_of(op[1])
            if queue is not None and queue in self.logs:
                batch = self.logs[queue].filling
                if batch is not None:
                    batch.records.append(record)
                    return
        self._settle([record], failed=False)

    def flush(self) -> bool:
        """Send each queue's batch of this loop iteration (a queue with a batch on its way
        sends its next one when that one is settled)."""
        for queue_log in self.logs.values():
            if queue_log.filling is not None and queue_log.sending is None:
                self._send(queue_log)
        if self.registry and self._registering is None:
            self._registering = asyncio.get_running_loop().create_task(self._register())
        return self._durable >= self.appended

    def _send(self, queue_log: QueueLog) -> None:
        batch = queue_log.filling
        assert batch is not None
        queue_log.filling = None
        queue_log.written += 1
        batch.seq = queue_log.written
        queue_log.sending = batch
        queue_log.sent_at = time.monotonic()
        self._link_of(queue_log).enqueue(queue_log)

    def _link_of(self, queue_log: QueueLog) -> NodeLink:
        node = self.client.nodes_manager.get_node_from_slot(queue_log.slot)
        link = self.links.get(node.name)
        if link is None or link.node is not node:
            link = self.links[node.name] = NodeLink(self, node)
        return link

    def acks_for(self, queue_log: QueueLog) -> int:
        """Replicas that must acknowledge the queue's writes: the setting, or 1 where the
        queue's shard has a replica."""
        if self.acks is not None:
            return self.acks
        shard = self.client.nodes_manager.slots_cache.get(queue_log.slot) or []
        return 1 if len(shard) > 1 else 0

    def acknowledged(self, queue: bytes) -> int | None:
        """The number of the queue's last batch the cluster acknowledged (None: this front
        does not hold the queue)."""
        queue_log = self.logs.get(queue)
        if queue_log is None:
            return None
        return queue_log.written - (1 if queue_log.sending is not None else 0)

    def probe(self, queue: bytes) -> None:
        """The cluster holds fewer of `queue`'s batches than it acknowledged (a lease's
        renewal read their number): send a batch now, an empty one if nothing is
        filling, whose number finds the gap, so that the queue is written back from
        memory (`_restore`) without waiting for a client's write. A batch on its way
        finds it by itself."""
        queue_log = self.logs.get(queue)
        if queue_log is None or queue_log.sending is not None:
            return
        if queue_log.filling is None:
            queue_log.filling = Batch()
        self._send(queue_log)

    def sweep_delay_ms(self, queue: bytes) -> int:
        """While a batch of `queue` has been on its way for SLOW_S or more, the sweep looks
        again in RECHECK_MS; once it is acknowledged, it waits as long again as the batch
        took (a CLAIM's or EXTEND's reply held that long gives its worker that much more)."""
        queue_log = self.logs.get(queue)
        if queue_log is None:
            return 0
        now = time.monotonic()
        if queue_log.sending is not None and now - queue_log.sent_at >= SLOW_S:
            return RECHECK_MS
        return max(0, int((queue_log.grace_until - now) * 1000))

    # --- answers -----------------------------------------------------------------------
    def answered(self, queue_log: QueueLog, result: Any, acknowledged: bool) -> None:
        """One queue's APPLY answer (and whether the WAIT after it counted enough)."""
        if self.logs.get(queue_log.queue) is not queue_log:
            return  # dropped meanwhile: its records were failed then
        batch = queue_log.sending
        assert batch is not None
        if isinstance(result, int) and acknowledged:
            now = time.monotonic()
            if now - queue_log.sent_at >= SLOW_S:
                queue_log.grace_until = now + (now - queue_log.sent_at)
            queue_log.sending = None
            queue_log.failing_since = None
            queue_log.retries = 0
            self._settle(batch.records, failed=False)
            if queue_log.filling is not None:
                self._send(queue_log)
            return
        if isinstance(result, ResponseError):
            text = str(result).encode()
            if text.startswith(_GAP) and not batch.restore:
                log.warning("cluster: the cluster lost writes of queue %r it had acknowledged "
                            "(%s); writing the queue back from memory", queue_log.queue,
                            result)
                asyncio.get_running_loop().create_task(self._restore(queue_log))
                return
            if text.startswith(_FENCED) or text.startswith(_GAP):
                self._fail(queue_log, str(result))
                return
        now = time.monotonic()
        if queue_log.failing_since is None:
            queue_log.failing_since = now
            log.warning("cluster: a write of queue %r was not acknowledged (%s); retrying",
                        queue_log.queue, result if not acknowledged or result is None
                        else "too few replicas in time")
        if now - queue_log.failing_since >= self.timeout_s:
            self._fail(queue_log, f"not acknowledged within {self.timeout_s:g}s ({result})")
            return
        delay = min(RETRY_FIRST_S * 2 ** queue_log.retries, RETRY_MOST_S)
        queue_log.retries += 1
        self._refresh_topology()
        asyncio.get_running_loop().call_later(delay, self._resend, queue_log)

    async def _restore(self, queue_log: QueueLog) -> None:
        """Send, in place of the batch that found a gap, the whole queue as this front
        holds it: a DEL of every key of the queue the cluster or the front has, then
        the front's keys. Its records, and those of the batch filling meanwhile (whose
        writes the store holds too), settle with it."""
        queue = queue_log.queue
        try:
            _, names = await keys_in_cluster(self.client, queue)
        except (RedisError, OSError) as exc:
            if self.logs.get(queue) is queue_log:
                self._fail(queue_log, f"the lost writes could not be written back ({exc})")
            return
        batch = queue_log.sending
        if self.logs.get(queue) is not queue_log or batch is None:
            return  # dropped meanwhile: its records failed then
        filling = queue_log.filling
        if filling is not None:
            batch.records += filling.records
            queue_log.filling = None
        held = self.held(queue)
        doomed = list(dict.fromkeys([*names, *(key for key, _ in held)]))
        out: list[bytes] = []
        count = 0
        for start in range(0, len(doomed), ITEMS_PER_COMMAND):
            chunk = doomed[start:start + ITEMS_PER_COMMAND]
            append_command([b"DEL", *chunk], out, counted=True)
            count += 2 + len(chunk)
        for key, value in held:
            is_zset, items = items_of(value, copy=False)
            count += append_value(key, is_zset, list(items.items()), out, counted=True)
        batch.restore_with(b"".join(out), count)
        queue_log.failing_since = None
        queue_log.retries = 0
        self._link_of(queue_log).enqueue(queue_log)

    def _resend(self, queue_log: QueueLog) -> None:
        if self.logs.get(queue_log.queue) is queue_log and queue_log.sending is not None:
            self._link_of(queue_log).enqueue(queue_log)

    def _fail(self, queue_log: QueueLog, why: str) -> None:
        log.error("cluster: queue %r lost its writes (%s); dropped from this front, its "
                  "writers answered TRYAGAIN", queue_log.queue, why)
        self.disown(queue_log.queue)
        self.lost(queue_log.queue)
        self.notify()

    def _settle(self, records: list[int], failed: bool) -> None:
        if failed:
            self.failed += records
        self.settled.update(records)
        settled = self.settled
        while self._durable + 1 in settled:
            self._durable += 1
            settled.discard(self._durable)

    def _refresh_topology(self) -> None:
        """Have the client read the slots' owners again (a failover, a moved slot)."""
        if self._topology is None or self._topology.done():
            self._topology = asyncio.get_running_loop().create_task(self._reread_topology())

    async def _reread_topology(self) -> None:
        try:
            await self.client.nodes_manager.initialize()
        except RedisError as exc:
            log.warning("cluster: cannot read the slots' owners yet: %s", exc)

    async def _register(self) -> None:
        """Enter new queues in the registry (its own slot: ZADD NX, idempotent)."""
        try:
            while self.registry:
                pending, self.registry = self.registry, {}
                try:
                    mapping: dict[Any, Any] = {queue: float(at) for queue, at in pending.items()}
                    await self.client.zadd(REGISTRY, mapping, nx=True)
                except RedisError as exc:
                    log.warning("cluster: cannot enter queues in %r yet: %s", REGISTRY, exc)
                    pending.update(self.registry)
                    self.registry = pending
                    await asyncio.sleep(RETRY_MOST_S)
        finally:
            self._registering = None

    def info(self) -> dict[str, object]:
        return {"aof_enabled": 0, "cluster_queues_writing": len(self.logs),
                "cluster_records_unsettled": self.appended - self._durable}


class NodeLink:
    """One primary's connection for the sink: batches go out a pipeline at a time, each
    followed by WAIT on the same connection."""

    def __init__(self, sink: ClusterSink, node: ClusterNode) -> None:
        self.sink = sink
        self.node = node
        self.connection: Any = None
        self.ready: list[QueueLog] = []
        self.task: asyncio.Task[None] | None = None

    def enqueue(self, queue_log: QueueLog) -> None:
        self.ready.append(queue_log)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self.ready:
                batch, self.ready = self.ready, []
                await self._send(batch)
        finally:
            self.task = None

    async def _send(self, queue_logs: list[QueueLog]) -> None:
        sink = self.sink
        acks = max(sink.acks_for(queue_log) for queue_log in queue_logs)
        payload = [queue_log.command() for queue_log in queue_logs]
        if acks:
            payload.append(b"*3\r\n$4\r\nWAIT\r\n" + _bulk(b"%d" % acks) + _bulk(b"%d" % WAIT_MS))
        results: list[Any] = []
        acknowledged = True
        try:
            if self.connection is None:
                self.connection = self.node.acquire_connection()
            await self.connection.send_packed_command(b"".join(payload), check_health=False)
            for _ in queue_logs:
                try:
                    results.append(await self.connection.read_response())
                except ResponseError as exc:
                    results.append(exc)
            if acks:
                replicas = await self.connection.read_response()
                acknowledged = isinstance(replicas, int) and replicas >= acks
        except (RedisError, OSError) as exc:
            self._drop_connection()
            results += [exc] * (len(queue_logs) - len(results))
            acknowledged = False
        except asyncio.CancelledError:
            self._drop_connection()
            raise
        for queue_log, result in zip(queue_logs, results, strict=True):
            sink.answered(queue_log, result, acknowledged)
        sink.notify()

    def _drop_connection(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            asyncio.get_running_loop().create_task(connection.disconnect())
