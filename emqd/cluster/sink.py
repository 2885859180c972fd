"""The cluster sink: each loop iteration's plans of a queue, as one fenced script call.

The commit path (emqd/commit/path.py) hands this sink every committed plan as one
record (an offset: records are counted from 1). The records of a queue gather
in a batch; at the end of the loop iteration (`flush`) each queue's batch goes
to the primary of the queue's slot as one call of `scripts.APPLY`, which
applies its ops only if the queue's lease still holds this front's term, and
only once (the batch's number, checked against the queue's `written` key, makes
a retry after a lost answer harmless). The batches of all queues on one
primary travel in one pipeline on one connection of the sink's own
(`NodeLink`), followed by `WAIT acks timeout` when the queue's shard has
replicas to wait for (`WAIT` counts the writes of its own connection). Up to
WINDOW batches of a queue are on their way at once, in order on one link: the
primary applies one while the front plans the next, where one at a time left
each idle while the other worked. A record is kept when its batch was applied
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
  the slot's primary of the moment, until the oldest batch in flight is
  `timeout_ms` old (counted from its first sending: no writer waits longer),
  then fails the queue.
A failure of the oldest batch in flight takes the later ones along: they are
sent again behind it (their numbers make the ones already applied harmless),
or written back with it; the answers to their first sending are stale.
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

from emqd import errors
from emqd.cluster import scripts
from emqd.cluster.loader import keys_in_cluster
from emqd.cluster.names import (
    NOT_OWNER,
    REGISTRY,
    is_bookkeeping,
    owner_key,
    queue_of,
    written_key,
)
from emqd.cluster.nodes import Address, NodeError, Topology
from emqd.cluster.ownership import slot_of
from emqd.commit.plan import Op, Plan, Shape
from emqd.commit.sink import Sink
from emqd.errors import ReplyError
from emqd.persist.records import append_command
from emqd.persist.values import append_deletes, append_stored

log = logging.getLogger("emqd")

WAIT_MS = 1000  # one WAIT's longest timeout; a shortfall is retried until the write times out
RETRY_FIRST_S = 0.05  # the first retry of a failed batch; doubled up to RETRY_MOST_S
RETRY_MOST_S = 0.5
WINDOW = 3  # batches of one queue on their way at once: the next goes out while one applies
CONNECT_S = 2.0  # a primary's connection not made in this long fails (a retry follows)
# A batch unanswered this long means the store could not be written (a failover, a lost
# node): the stall sweep of its queue waits for it, then for as long again (`sweep_delay_ms`).
SLOW_S = 0.05
RECHECK_MS = 100  # how soon a sweep held by a batch still on its way looks again
DRAIN_POLL_S = 0.005  # how often a queue being let go looks whether its batches settled
CROSSSLOT = errors.Refusal("CROSSSLOT Keys in request don't hash to the same slot")
NOT_SERVED = errors.Refusal(
    "ERR cluster mode serves the queues' keys (emq:{QUEUE}:...) only; use the cluster "
    "directly for other keys")
NOT_FLUSHED = errors.Refusal(
    "ERR FLUSHALL and FLUSHDB are not served in cluster mode: flush the cluster itself, then "
    "restart the fronts")
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

    __slots__ = ("parts", "counts", "count", "merges", "records", "seq", "restore", "sent_at")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.counts: list[int] = []  # each part's arguments
        self.count = 0
        self.merges: dict[tuple[bytes, tuple[bytes, ...]], int] = {}
        self.records: list[int] = []
        self.seq = 0  # its number, once it is sent
        self.restore = False
        self.sent_at = 0.0  # monotonic: when it was first sent

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


def restore_ops(names: list[bytes], held: list[tuple[bytes, Any]]) -> tuple[bytes, int]:
    """A queue's whole state as RESTORE's ops (scripts.py), and their count of arguments:
    a DEL of `names` (the keys the cluster holds) and of `held`'s keys, then `held`'s
    values (HSET, ZADD). The cluster sink's write-back, and a migration's writing."""
    doomed = list(dict.fromkeys([*names, *(key for key, _ in held)]))
    out: list[bytes] = []
    count = append_deletes(doomed, out, counted=True)
    for key, value in held:
        count += append_stored(key, value, out, counted=True)
    return b"".join(out), count


class QueueLog:
    """One owned queue's writes on their way to the cluster: the batch filling in this
    loop iteration, and up to WINDOW batches sent and not yet acknowledged, in order."""

    __slots__ = ("queue", "owner", "written", "filling", "inflight", "wire", "paused", "link",
                 "slot", "retries", "grace_until", "last", "watchdog")

    def __init__(self, queue: bytes, owner: bytes, written: int) -> None:
        self.queue = queue
        self.owner = owner  # the owner key's value: the term and this front's address
        self.written = written  # the number of the last batch sent (the cluster holds it, or will)
        self.filling: Batch | None = None  # records of this loop iteration
        self.inflight: list[Batch] = []  # sent, not acknowledged yet (or waiting to be resent)
        # Counts the times the batches in flight were sent again or replaced: an answer to
        # an earlier sending is stale (the batches after a failed one fail with it, and are
        # sent again behind it).
        self.wire = 0
        self.paused = False  # a retry or a write-back is due: nothing new goes out before it
        self.link: NodeLink | None = None  # where the batches in flight went (one link: in order)
        self.slot = slot_of(queue)
        self.retries = 0
        self.grace_until = 0.0  # monotonic: the stall sweep waits until then (an outage's length)
        self.last = 0  # its newest record: every reply about the queue tells of it (`last_of`)
        # Fails the queue once its oldest batch in flight is `timeout_ms` old (`_overdue`).
        self.watchdog: asyncio.TimerHandle | None = None

    def command(self, batch: Batch) -> bytes:
        """The APPLY (or RESTORE) call of `batch`, as RESP."""
        head = b"*%d\r\n" % (7 + batch.count) + (_RESTORE_HEAD if batch.restore else _APPLY_HEAD)
        return b"".join([head, _bulk(owner_key(self.queue)), _bulk(written_key(self.queue)),
                         _bulk(self.owner), _bulk(b"%d" % batch.seq), *batch.parts])


class ClusterSink(Sink):
    def __init__(self, topology: Topology, acks: int | None, timeout_ms: int,
                 lost: Callable[[bytes], None],
                 held: Callable[[bytes], list[tuple[bytes, Any]]]) -> None:
        super().__init__()
        self.fallible = True
        self.checks_plans = True
        self.topology = topology
        self.acks = acks  # None: 1 where the shard has a replica now (`acks_for`)
        self.timeout_s = timeout_ms / 1000
        self.wait_ms = min(WAIT_MS, timeout_ms)  # a WAIT's own timeout: within the write's
        self.lost = lost  # the front drops a failed queue (front.py)
        self.held = held  # a queue's keys and values in the front's store, for `_restore`
        self.logs: dict[bytes, QueueLog] = {}
        self._durable = 0  # every record up to here is settled
        self.settled: set[int] = set()  # settled records above `_durable`
        self.failed: list[int] = []
        self.registry: dict[bytes, bytes] = {}  # queues to enter in the registry (ZADD NX)
        self.links: dict[Address, NodeLink] = {}
        self._registering: asyncio.Task[None] | None = None
        self._admitted: tuple[Plan, bytes] | None = None  # `refusal`'s last: the plan's queue

    # --- the queues this front owns --------------------------------------------------
    def own(self, queue: bytes, owner: bytes, written: int) -> None:
        """The front owns `queue` now, under the lease value `owner`; the cluster holds
        `written` batches of it."""
        self.logs[queue] = QueueLog(queue, owner, written)

    def disown(self, queue: bytes) -> None:
        """The front let `queue` go: its records not yet kept fail, and the commit path is
        told at once (what waited for them is answered now, not at its next flush, which
        a front cut off from the cluster may never have)."""
        queue_log = self.logs.pop(queue, None)
        if queue_log is None:
            return
        if queue_log.watchdog is not None:
            queue_log.watchdog.cancel()
        batches = [batch for batch in (*queue_log.inflight, queue_log.filling)
                   if batch is not None]
        for batch in batches:
            self._settle(batch.records, failed=True)
        if batches:
            self.notify()

    # --- the commit path's side --------------------------------------------------------
    @property
    def durable(self) -> int:
        return self._durable

    def resolved(self, offset: int) -> bool:
        return offset <= self._durable or offset in self.settled

    def last_of(self, queue: bytes) -> int:
        """The newest record of `queue` (0: none since this front took it). A queue's
        records are kept in order and fail together from the first lost one on, so a
        reply that waits for this one, and is replaced if it is lost, tells of nothing
        the cluster lost (emqd/commit/path.py, the rule)."""
        queue_log = self.logs.get(queue)
        return 0 if queue_log is None else queue_log.last

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
                return NOT_OWNER() if queue is not None else NOT_SERVED()
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
            return NOT_OWNER()
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
                queue_log.last = record
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
            queue_log.last = record

    def _record(self, record: int, ops: list[Op]) -> None:
        """An EXEC's one record: its batch is its queue's (all its plans are one queue's:
        the router refuses an EXEC across queues)."""
        for op in ops:
            queue = queue_of(op[1])
            if queue is not None and queue in self.logs:
                queue_log = self.logs[queue]
                batch = queue_log.filling
                if batch is not None:
                    batch.records.append(record)
                    queue_log.last = record
                    return
        self._settle([record], failed=False)

    def flush(self) -> bool:
        """Send each queue's batch of this loop iteration (a queue with WINDOW batches on
        their way, or a retry due, sends it once one is settled)."""
        # a copy: a link found stale on the way fails what it carried, which can drop a queue
        for queue_log in list(self.logs.values()):
            if queue_log.filling is not None and self._may_send(queue_log):
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
        batch.sent_at = time.monotonic()
        queue_log.inflight.append(batch)
        if queue_log.watchdog is None:
            queue_log.watchdog = asyncio.get_running_loop().call_later(
                self.timeout_s, self._overdue, queue_log)
        link = queue_log.link = self._link_of(queue_log)
        link.enqueue(queue_log, batch)

    def _overdue(self, queue_log: QueueLog) -> None:
        """A queue's write timeout, measured from its oldest batch's first sending: no
        reply waits longer for the cluster, whatever the retries (a silent primary, a
        failover, replicas that do not acknowledge). Re-armed for the next oldest."""
        queue_log.watchdog = None
        if self.logs.get(queue_log.queue) is not queue_log or not queue_log.inflight:
            return
        age = time.monotonic() - queue_log.inflight[0].sent_at
        if age >= self.timeout_s:
            self._fail(queue_log, f"not acknowledged within {self.timeout_s:g}s")
            return
        queue_log.watchdog = asyncio.get_running_loop().call_later(
            self.timeout_s - age, self._overdue, queue_log)

    def _may_send(self, queue_log: QueueLog) -> bool:
        """A new batch of the queue may go out now: no retry or write-back due, fewer than
        WINDOW on their way, and those on the link it would take (batches on two links
        could arrive out of order)."""
        return not queue_log.paused and (not queue_log.inflight or (
            len(queue_log.inflight) < WINDOW and self._link_of(queue_log) is queue_log.link))

    def _link_of(self, queue_log: QueueLog) -> NodeLink:
        """The link to the queue's slot's primary of the moment (a link to nowhere, whose
        batches fail and are retried, while no node serves the slot)."""
        address = self.topology.primary(queue_log.slot)
        link = self.links.get(address) if address is not None else None
        if link is None:
            link = NodeLink(self, address)
            if address is not None:
                self.links[address] = link
        return link

    def acks_for(self, queue_log: QueueLog) -> int:
        """Replicas that must acknowledge the queue's writes: the setting, or 1 where the
        queue's shard has a replica in the slot map of the moment (read every second and
        after every error, nodes.py: a replica that is back counts again within a
        second), 0 where it has none."""
        if self.acks is not None:
            return self.acks
        shard = self.topology.shard(queue_log.slot)
        return 1 if shard is not None and shard.replicas else 0

    def acknowledged(self, queue: bytes) -> int | None:
        """The number of the queue's last batch the cluster acknowledged (None: this front
        does not hold the queue)."""
        queue_log = self.logs.get(queue)
        if queue_log is None:
            return None
        return queue_log.written - len(queue_log.inflight)

    def probe(self, queue: bytes) -> None:
        """The cluster holds fewer of `queue`'s batches than it acknowledged (a lease's
        renewal read their number): send a batch now, an empty one if nothing is
        filling, whose number finds the gap, so that the queue is written back from
        memory (`_restore`) without waiting for a client's write. A batch on its way
        finds it by itself."""
        queue_log = self.logs.get(queue)
        if queue_log is None or queue_log.inflight or not self._may_send(queue_log):
            return
        if queue_log.filling is None:
            queue_log.filling = Batch()
        self._send(queue_log)

    def clear(self, queue: bytes) -> bool:
        """Nothing of `queue` on its way to the cluster, nor waiting to go."""
        queue_log = self.logs.get(queue)
        return queue_log is None or (not queue_log.inflight and queue_log.filling is None)

    async def drained(self, queue: bytes) -> None:
        """Return once `clear(queue)` (the queue being let go: its last batches
        acknowledged, or failed)."""
        while not self.clear(queue):
            await asyncio.sleep(DRAIN_POLL_S)

    def sweep_delay_ms(self, queue: bytes) -> int:
        """While a batch of `queue` has been on its way for SLOW_S or more, the sweep looks
        again in RECHECK_MS; once it is acknowledged, it waits as long again as the batch
        took (a CLAIM's or EXTEND's reply held that long gives its worker that much more)."""
        queue_log = self.logs.get(queue)
        if queue_log is None:
            return 0
        now = time.monotonic()
        if queue_log.inflight and now - queue_log.inflight[0].sent_at >= SLOW_S:
            return RECHECK_MS
        return max(0, int((queue_log.grace_until - now) * 1000))

    # --- answers -----------------------------------------------------------------------
    def answered(self, queue_log: QueueLog, batch: Batch, wire: int, result: Any,
                 acknowledged: bool) -> None:
        """One batch's APPLY answer (and whether the WAIT after it counted enough). Answers
        come in the order the batches were sent; one to a sending since replaced (the
        queue was dropped, or its batches were sent again) is stale and ignored."""
        if (self.logs.get(queue_log.queue) is not queue_log or wire != queue_log.wire
                or not queue_log.inflight or queue_log.inflight[0] is not batch):
            return
        if isinstance(result, int) and acknowledged:
            now = time.monotonic()
            if now - batch.sent_at >= SLOW_S:
                queue_log.grace_until = now + (now - batch.sent_at)
            del queue_log.inflight[0]
            queue_log.retries = 0
            self._settle(batch.records, failed=False)
            if queue_log.filling is not None and self._may_send(queue_log):
                self._send(queue_log)
            return
        # The batches sent after this one meet the same fate: they are sent again behind
        # it (or written back with it), and their answers to this sending are stale.
        queue_log.wire += 1
        queue_log.paused = True
        if isinstance(result, NodeError):
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
        if time.monotonic() - batch.sent_at >= self.timeout_s:
            self._fail(queue_log, f"not acknowledged within {self.timeout_s:g}s ({result})")
            return
        if not queue_log.retries:
            log.warning("cluster: a write of queue %r was not acknowledged (%s); retrying",
                        queue_log.queue, "too few replicas in time"
                        if isinstance(result, int) else result)
        delay = min(RETRY_FIRST_S * 2 ** queue_log.retries, RETRY_MOST_S)
        queue_log.retries += 1
        self.topology.refresh()
        asyncio.get_running_loop().call_later(delay, self._resend, queue_log)

    async def _restore(self, queue_log: QueueLog) -> None:
        """Send, in place of the batch that found a gap, the whole queue as this front
        holds it: a DEL of every key of the queue the cluster or the front has, then
        the front's keys. Its records, and those of the batch filling meanwhile (whose
        writes the store holds too), settle with it."""
        queue = queue_log.queue
        try:
            _, names = await keys_in_cluster(self.topology, queue)
        except (NodeError, OSError, TimeoutError) as exc:
            if self.logs.get(queue) is queue_log:
                self._fail(queue_log, f"the lost writes could not be written back ({exc})")
            return
        if self.logs.get(queue) is not queue_log or not queue_log.inflight:
            return  # dropped meanwhile: its records failed then
        batch, *later = queue_log.inflight
        for other in (*later, queue_log.filling):
            if other is not None:
                batch.records += other.records
        queue_log.filling = None
        queue_log.inflight = [batch]
        batch.seq = queue_log.written  # the number of the last batch it stands for
        batch.restore_with(*restore_ops(names, self.held(queue)))
        queue_log.retries = 0
        self._resend(queue_log)

    def _resend(self, queue_log: QueueLog) -> None:
        """Send the batches in flight again, in order, on the link to the slot's primary
        of the moment; new batches may follow them."""
        if self.logs.get(queue_log.queue) is not queue_log:
            return
        queue_log.paused = False
        link = queue_log.link = self._link_of(queue_log)
        for batch in queue_log.inflight:
            link.enqueue(queue_log, batch)
        if queue_log.filling is not None and self._may_send(queue_log):
            self._send(queue_log)

    def _fail(self, queue_log: QueueLog, why: str) -> None:
        log.error("cluster: queue %r lost its writes (%s); dropped from this front, its "
                  "writers answered TRYAGAIN", queue_log.queue, why)
        self.disown(queue_log.queue)
        self.lost(queue_log.queue)

    def _settle(self, records: list[int], failed: bool) -> None:
        if failed:
            self.failed += records
        self.settled.update(records)
        settled = self.settled
        while self._durable + 1 in settled:
            self._durable += 1
            settled.discard(self._durable)

    async def _register(self) -> None:
        """Enter new queues in the registry (its own slot: ZADD NX, idempotent)."""
        try:
            while self.registry:
                pending, self.registry = self.registry, {}
                pairs = [part for queue, at in pending.items() for part in (at, queue)]
                try:
                    await self.topology.call(slot_of(REGISTRY), (b"ZADD", REGISTRY, b"NX",
                                                                  *pairs))
                except (NodeError, OSError, TimeoutError) as exc:
                    log.warning("cluster: cannot enter queues in %r yet: %s", REGISTRY, exc)
                    pending.update(self.registry)
                    self.registry = pending
                    await asyncio.sleep(RETRY_MOST_S)
        finally:
            self._registering = None

    def close_links(self) -> None:
        """Shutdown (the commit path settled): the primaries' connections close."""
        for link in self.links.values():
            link.close(ConnectionError("the front is shutting down"))
        self.links.clear()

    def info(self) -> dict[str, object]:
        return {"aof_enabled": 0, "cluster_queues_writing": len(self.logs),
                "cluster_records_unsettled": self.appended - self._durable}


class NodeLink:
    """One primary's connection for the sink, of its own (a `Pipe`: asyncio streams and
    hiredis, as the server's own wire). Each loop iteration's batches for the node go out
    as one pipeline (followed by `WAIT`, which counts the writes of its own connection)
    without waiting for the answers to the pipelines before it, which come in order: the
    node applies one iteration's batches while the front plans the next. A pipeline
    unanswered after the write timeout and a WAIT's closes the connection (a node that
    stopped answering without closing it: a stopped process, a host cut off), and its
    batches fail and are retried, where they would have waited for ever.

    A link to no address (no node serves the slot now) fails what it is given, to be
    retried once the slot map names a primary."""

    def __init__(self, sink: ClusterSink, address: Address | None) -> None:
        self.sink = sink
        self.pipe = sink.topology.connection(address) if address is not None else None
        self.ready: list[tuple[QueueLog, Batch, int]] = []  # (queue, batch, its wire)
        self.pushing = False

    def enqueue(self, queue_log: QueueLog, batch: Batch) -> None:
        """Send `batch` of `queue_log` in this loop iteration's pipeline."""
        self.ready.append((queue_log, batch, queue_log.wire))
        if not self.pushing:
            self.pushing = True
            asyncio.get_running_loop().call_soon(self._push)

    def _push(self) -> None:
        self.pushing = False
        items = [item for item in self.ready if item[2] == item[0].wire]  # not resent since
        self.ready = []
        if not items:
            return
        if self.pipe is None:
            self._fail_all(ConnectionError("no node serves the queue's slot"), items)
            return
        sink = self.sink
        acks = max(sink.acks_for(queue_log) for queue_log, _, _ in items)
        payload = [queue_log.command(batch) for queue_log, batch, _ in items]
        if acks:
            payload.append(b"*3\r\n$4\r\nWAIT\r\n" + _bulk(b"%d" % acks)
                           + _bulk(b"%d" % sink.wait_ms))

        def done(replies: Any) -> None:
            if isinstance(replies, BaseException):
                self._fail_all(replies, items)
                return
            acknowledged = True
            if acks:
                replicas = replies[-1]
                acknowledged = isinstance(replicas, int) and replicas >= acks
            for (queue_log, batch, wire), result in zip(items, replies, strict=False):
                sink.answered(queue_log, batch, wire, result, acknowledged)
            sink.notify()

        self.pipe.send(b"".join(payload), len(payload), sink.timeout_s, done)

    def _fail_all(self, exc: BaseException, items: list[tuple[QueueLog, Batch, int]]) -> None:
        for queue_log, batch, wire in items:
            self.sink.answered(queue_log, batch, wire, exc, False)
        self.sink.notify()

    def close(self, why: BaseException) -> None:
        """Let the connection go; what was sent or is ready on it fails with `why` (its
        queues retry it on the link of the moment)."""
        ready, self.ready = self.ready, []
        if self.pipe is not None:
            self.pipe.close(why)
        self._fail_all(why, ready)
