"""The one commit path: applied, kept, then answered (Redis's beforeSleep, in one place).

Every write of the server goes through `Commit.apply(plan)`: a client's verb
or plain command (emqd/dispatch.py), an EXEC (`begin_batch` ... `end_batch`:
one record), housekeeping's slices and the dashboard's actions (which run
through the dispatcher too). In that order it

1. shows the plan's ops to the sink if it asks (a compaction in progress),
2. applies them to the keyspace (one synchronous pass),
3. hands the plan to the sink as one record, which moves `sink.appended`,
4. tells `Dues` when housekeeping has work because of it,
5. hands its events to the listeners (metrics, Pub/Sub's queue events),

and returns the sink offset that the plan's answer must wait for.

Everything that tells a client of a write leaves through `send(outlet, data,
needed)`: a reply, a Pub/Sub message, a woken EMQ.WAIT. It leaves at once
when the sink already holds `needed` durably and nothing of that client waits
before it; otherwise it is held, in order, and released by `flush`, which
runs once at the end of the loop iteration in which something was appended or
held (and whenever the sink notifies, an asynchronous sink's acknowledgement):
the sink keeps what was appended (write(2), fsync, or a remote call), then
every held output whose offset is now durable leaves, in order, and the
connections that stopped for them go on with their requests.

A sink that cannot keep records (`sink.failing`) makes the commit path try
again every RETRY_S; meanwhile what depends on the unkept records waits, and
so does everything after it on its connection.

A sink that loses single records for good (`sink.fallible`: a remote store
that refused them, or never acknowledged them) settles its records out of
order and names the lost ones (`take_failed`). The rule, here and nowhere
else: every output names the record it tells of (`own`: a write's reply its
write's record; a reply the router ties to a queue (`Session.tells`) the
newest record of that queue, whatever woke it: a parked CLAIM, an EMQ.WAIT,
an EXEC; a queue event its plan's record). It leaves only once that record is
settled, and if the record was lost, what its sender gave for that case goes
instead (a retryable error for a reply) or nothing (a Pub/Sub message). A
fallible sink keeps each queue's records in order and loses a queue's records
from the first lost one on (cluster mode's: emqd/cluster/sink.py), so the
newest record of a queue stands for every earlier one: nothing leaves that
tells of a write the sink lost.

The commit path knows outlets (`Outlet`: what a connection is to it), never
sessions or sockets, and the sink knows records and offsets, never outlets.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Final

from mypy_extensions import trait

from emqd.commit.dues import Dues
from emqd.commit.events import Listener
from emqd.commit.plan import Op, Plan
from emqd.commit.sink import Sink
from emqd.store.keyspace import Keyspace

RETRY_S: Final = 1.0  # while the sink refuses records, how often it is tried again


@trait
class Outlet:
    """Where the commit path sends a client's output (a connection: emqd/wire/protocol.py).

    `holding` counts the outputs the commit path holds for it: while any is
    held, later outputs queue behind it, so a client always reads its replies
    in order.
    """

    holding: int

    def deliver(self, data: bytes) -> None:
        """Write `data` to the client now."""
        raise NotImplementedError

    def released(self) -> None:
        """The commit path let every held output of this client go: go on with its
        requests, which had stopped for them."""
        raise NotImplementedError


class Commit:
    def __init__(self, keyspace: Keyspace, sink: Sink, dues: Dues) -> None:
        self.keyspace = keyspace
        self.sink = sink
        self.keeps = sink.keeps  # False: a NullSink, passed over
        self.dues = dues
        # Called with each committed plan's events, in plan order, once the plan is
        # in the sink (an EXEC's plans: at its end, with its record).
        self.listeners: list[Listener] = []
        self.dirty = 0  # ops applied since the last save (Redis's rdb_changes_since_last_save)
        self._batch: list[Plan] | None = None  # plans of an EXEC in progress
        # Outputs waiting for the sink: (outlet, data, the offset they need, the record
        # they tell of or 0, what goes instead if that record fails or None: drop it).
        self.held: deque[tuple[Outlet, bytes, int, int, bytes | None]] = deque()
        self.fallible = sink.fallible
        # Records a fallible sink lost that an output still held may name (cleared once
        # nothing is held: a new output never names a lost record, since the sink's
        # queue was dropped with it).
        self.lost: set[int] = set()
        self._waiting: list[tuple[int, asyncio.Future[bool]]] = []  # `durable_at`'s
        self._flush_scheduled = False
        self._retry: asyncio.TimerHandle | None = None
        sink.attach(self.schedule_flush)

    def listen(self, listener: Listener) -> None:
        """From now on, `listener` is handed the events of every committed plan."""
        self.listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    # --- applying --------------------------------------------------------------------
    def apply(self, plan: Plan) -> int:
        """Apply a plan's ops and hand them to the sink as one record (or to the open
        EXEC); the offset an answer telling of it must wait for. Raises the sink's
        ReplyError, with nothing applied, for a plan it cannot keep as one unit."""
        ops = plan.ops
        if not ops:
            return 0
        sink = self.sink
        keeps = self.keeps
        if keeps and sink.checks_plans:
            refusal = sink.refusal(plan)
            if refusal is not None:
                raise refusal  # before anything changed
        if keeps and sink.watches_applies:
            sink.before_apply(ops)
        shape = plan.shape
        if shape is not None:
            shape.applier.apply(self.keyspace, ops)
        else:
            self.keyspace.apply(ops)
        self.dirty += len(ops)
        batch = self._batch
        if batch is not None:
            batch.append(plan)
        elif keeps:
            sink.append(plan)
            self.schedule_flush()
        due = plan.due
        if due is None or due:
            self.dues.learn(plan)
        if batch is not None:
            return 0  # the EXEC's one record, at its end, is what its answer waits for
        if plan.events:
            for listener in self.listeners:
                listener(plan.events)
        return sink.appended if keeps else 0

    def mirror(self, ops: list[Op]) -> None:
        """Bring the store in line with what the sink already holds, without a record:
        a remote sink's data entering the store (cluster mode: a queue a front takes
        over, its keys as loaded) or leaving it (a queue let go). Not a change to keep,
        nor one housekeeping or the listeners learn of (housekeeping reads a queue taken
        over itself: `Housekeeping.watch`)."""
        self.keyspace.apply(ops)

    def begin_batch(self) -> None:
        """From here to `end_batch`, commits are kept together (EXEC)."""
        self._batch = []

    def end_batch(self) -> int:
        """Hand the EXEC's plans to the sink as one record, then show the listeners their
        events, in order: only now does the sink hold what they tell of. The offset
        the EXEC's answer waits for (0: it wrote nothing)."""
        plans, self._batch = self._batch, None
        if not plans:
            return 0
        if self.keeps:
            self.sink.append_batch(plans)
            self.schedule_flush()
        for plan in plans:
            if plan.events:
                for listener in self.listeners:
                    listener(plan.events)
        return self.sink.appended if self.keeps else 0

    # --- answering ---------------------------------------------------------------------
    def send(self, outlet: Outlet, data: bytes, needed: int, eager: bool = True, own: int = 0,
             instead: bytes | None = None) -> None:
        """Send `data` once the sink holds everything up to `needed` durably.

        `needed` is the offset of the writes the data tells of: a reply's, its
        client's own last write (`Session.log_mark`); a queue event's, the record of
        the plan it reports. Under a `strict` sink every output waits for every
        record appended so far, reads too, so that none shows a write the sink
        could still lose. `eager`: the output may ask the sink to keep its records
        now (`write_now`, a write(2) under `everysec`) rather than at the end of the
        loop iteration; a queue event is not eager, so that a subscriber costs a
        pipeline of verbs no more system calls than it made without one.
        `own`: the record the data tells of (a write's reply, an event, a reply the router
        tied to its queue), if any; should a fallible sink lose it, `instead` goes
        out in its place (None: nothing). See the module's docstring.
        """
        if not self.keeps:
            outlet.deliver(data)  # nothing is kept, so nothing is held
            return
        sink = self.sink
        if sink.strict and sink.failing is None:
            needed = sink.appended
        if not outlet.holding:
            if self.fallible:
                if self._settled(needed, own):
                    if own in self.lost:
                        if instead is not None:
                            outlet.deliver(instead)
                        return
                    outlet.deliver(data)
                    return
            elif needed <= sink.durable:
                outlet.deliver(data)
                return
            if eager and not sink.strict and sink.failing is None and sink.write_now() \
                    and needed <= sink.durable:
                outlet.deliver(data)
                return
        outlet.holding += 1
        self.held.append((outlet, data, needed, own, instead))
        self.schedule_flush()

    def _settled(self, needed: int, own: int) -> bool:
        """Under a fallible sink: whether an output that waits for `needed` and tells of
        `own` may leave now (both settled: kept, or lost)."""
        sink = self.sink
        return (needed <= sink.durable or sink.resolved(needed)) and (
            own <= sink.durable or sink.resolved(own))

    def durable_at(self, offset: int) -> asyncio.Future[bool] | None:
        """None when the sink holds `offset` durably now; else a future that is set when
        it does (True), or lost it (False: a fallible sink): the dashboard's actions
        answer after it."""
        if offset <= self.sink.durable:
            return None
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((offset, future))
        self.schedule_flush()
        return future

    # --- the end of a loop iteration -------------------------------------------------------
    def schedule_flush(self) -> None:
        """Flush at the end of this loop iteration (once, however often it is asked).
        Outside a running loop (a core driven by a test or a tool) there is no end of
        an iteration to wait for: it flushes at once."""
        if not self._flush_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._flush_scheduled = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Have the sink keep what was appended, then release what it now holds durably,
        in order, and let the connections that stopped for it go on. While the sink
        refuses, this runs again every RETRY_S until it takes the records."""
        self._flush_scheduled = False
        sink = self.sink
        sink.flush()
        durable = sink.durable
        failed: set[int] | None = None
        if self.fallible:
            failed = self.lost
            failed.update(sink.take_failed())
        held = self.held
        stuck: set[Outlet] = set()
        kept: deque[tuple[Outlet, bytes, int, int, bytes | None]] = deque()
        released: list[Outlet] = []
        # Under a fallible sink each write's reply was held on its own: what leaves is
        # gathered per outlet, in order, into one write each, not one write a reply.
        leaving: dict[Outlet, list[bytes]] | None = {} if failed is not None else None
        while held:
            entry = held.popleft()
            outlet, data, needed, own, instead = entry
            if outlet in stuck or (not self._settled(needed, own) if failed is not None
                                   else needed > durable):
                stuck.add(outlet)
                kept.append(entry)
                continue
            outlet.holding -= 1
            if failed and own in failed:
                if instead is None:
                    if not outlet.holding:
                        released.append(outlet)
                    continue
                data = instead
            if leaving is None:
                outlet.deliver(data)
            else:
                out = leaving.get(outlet)
                if out is None:
                    leaving[outlet] = [data]
                else:
                    out.append(data)
            if not outlet.holding:
                released.append(outlet)
        self.held = kept
        if leaving:
            for outlet, out in leaving.items():
                outlet.deliver(out[0] if len(out) == 1 else b"".join(out))
        if self._waiting:
            self._wake_waiting(durable, failed)
        if failed and not kept and not self._waiting:
            failed.clear()  # nothing held can name them any more
        if sink.failing is not None and self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(RETRY_S, self._retry_flush)
        for outlet in released:
            outlet.released()

    def _wake_waiting(self, durable: int, failed: set[int] | None) -> None:
        """Settle `durable_at`'s futures whose record is now kept (True) or lost (False)."""
        waiting: list[tuple[int, asyncio.Future[bool]]] = []
        for offset, future in self._waiting:
            if offset <= durable or (failed is not None and self.sink.resolved(offset)):
                if not future.done():
                    future.set_result(not failed or offset not in failed)
            else:
                waiting.append((offset, future))
        self._waiting = waiting

    def _retry_flush(self) -> None:
        self._retry = None
        self.flush()

    # --- SAVE and shutdown ---------------------------------------------------------------
    def save(self) -> bool:
        """Everything applied so far is kept when this returns True (SAVE)."""
        if not self.sink.save():
            self.schedule_flush()  # which arms the retry: with writes refused, nothing else would
            return False
        self.dirty = 0
        return True

    async def settle(self, timeout_s: float) -> None:
        """Wait, at most `timeout_s`, until the sink holds (or failed) everything appended:
        a sink that acknowledges later, at shutdown."""
        self.flush()
        waiting = self.durable_at(self.sink.appended)
        if waiting is not None:
            try:
                await asyncio.wait_for(waiting, timeout_s)
            except TimeoutError:
                pass

    def close(self) -> bool:
        """Shutdown: keep everything (False if the sink could not), release what that
        answered, and close the sink."""
        self.flush()
        kept = self.sink.close()
        if kept:
            self.flush()  # the outputs whose records are now in
        return kept
