"""The Worker: claim jobs in batches, run the handler, keep the leases alive, settle in
pipelines, stop cleanly.

Shape (each piece small, the decisions in outcome.py):
- one claimer asks EMQ.CLAIM for up to as many jobs as there are free slots (at
  most a quarter of the concurrency at once, `CLAIM_SHARE`, so that the next
  batches are on their way while one runs), with BLOCK, so an idle worker parks
  on the server instead of polling;
- each claimed job is a `JobRun`: its handler (an async function as a task, a
  plain one on the worker's threads: handler.py) and an optional timeout timer.
  Whichever ends the run first (handler done, timeout, lost lease, shutdown)
  picks the settlement (`_end`), and the run sends that one verb;
- the verbs go through the worker's link (link.py): claims on a connection of
  their own, everything else pipelined on one more, a loop turn's worth per
  write; a settle is a future and a callback, not a task;
- one heartbeat EXTENDs every held lease every third of the lease, all of them
  in one write, and tells the lease keeper (emqd/client/lease_keeper.py), a process of
  its own, that the loop runs: while a handler holds the GIL in C the keeper
  extends the leases instead;
- on SIGINT/SIGTERM the claimer stops, running jobs get `grace_ms` to finish,
  and the rest are REQUEUEd;
- every `beat_ms` it sends EMQ.BEAT with its name and does what an operator asked
  (EMQ.WORKER, the dashboard's Workers page): `quiet` stops claiming until `run`
  again, `stop` stops as SIGTERM does (protocol section 22.6);
- a job that EMQ.CANCEL ended answers EMQCANCELLED to the next verb about it (a
  heartbeat's EXTEND, a report, the settling verb): the run ends there, sending
  nothing more; an async handler's task is cancelled, a plain handler sees
  `job.cancelled` (a thread cannot be stopped);
- with tracing on (tracing.py) it claims WITHTRACE and runs each handler in a
  `process {queue}` span parented by its producer's;
- once a COMPLETE or a FAIL the run sent is accepted, the `on_completed` /
  `on_failed` hook hears of it (a hook that raises is logged, never more).

Failure modes it is built for: an EMQSTALE reply means the lease is gone, so
the run is dropped with one log line and the verb is not retried; a lost
connection makes every part back off, and before claiming again the claimer
re-extends the leases it holds, so a job recovered by the server while the
worker was away is dropped here before it can be claimed twice at once. A lost
connection is never a job's failure: the handler's reports (`job.progress`,
`job.log`, `job.children`) wait for the server to come back instead of raising
into the handler, and the settling verb is sent again; whatever lease was lost
meanwhile answers EMQSTALE and its result is dropped, charging nothing (a
COMPLETE sent again that meets EMQSTALE is looked up first: its first sending
may have taken effect, `_confirm`). The
outage is logged once when it begins and once when it ends (reconnect.Outage).

The worker names its connections (CLIENT SETNAME, emqd/sessions/worker_name.py), so the
dashboard's Workers page shows it with the jobs it holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import itertools
import logging
import math
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.exceptions import AuthenticationError, ResponseError

from emqd.client import handler as handlers
from emqd.client import outcome, tracing
from emqd.client.commands import Job, JobInfo
from emqd.client.errors import (
    NOT_NOW,
    TRANSPORT_ERRORS,
    JobCancelled,
    PermanentError,
    StaleJob,
    is_permanent,
)
from emqd.client.handler import Handler, ThroughWorker
from emqd.client.lease_keeper import Keeper
from emqd.client.link import Link
from emqd.client.reconnect import Backoff, Outage
from emqd.sessions import worker_name

log = logging.getLogger("emqd.worker")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: `on_completed(job, result)`, `on_failed(job, error)`: a function or an async function.
Hook = Callable[[Job, Any], Any]
#: How long a settling verb is retried over a lost connection once stopping, so
#: that shutdown stays bounded (the server's sweep recovers what is left).
SHUTDOWN_SETTLE_S = 2.0
#: One claim asks for at most this share of the concurrency, so that while one batch
#: runs and settles the next is already claimed (docs/PERFORMANCE.md, "The worker").
CLAIM_SHARE = 0.25
#: How often the worker asks the server what an operator wants of it (EMQ.BEAT).
BEAT_MS = 2000
T = TypeVar("T")


@dataclass
class Counts:
    """What the worker has done since it started (for the progress line and tests)."""

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    dead: int = 0
    timed_out: int = 0
    requeued: int = 0
    snoozed: int = 0
    lost: int = 0
    cancelled: int = 0
    reconnects: int = 0


class JobRun:
    """One claimed job, from claim to settlement. `ended` once `Worker._end` picked its
    settlement (or outcome.LOST); later events are ignored."""

    __slots__ = ("job", "ended", "task", "timer", "backoff", "span", "context")

    def __init__(self, job: Job, span: tracing.Processing | None = None) -> None:
        self.job = job
        self.ended = False
        self.task: asyncio.Future[Any] | None = None  # an async handler's
        self.timer: asyncio.TimerHandle | None = None
        self.backoff: Backoff | None = None  # set once its settling verb is sent again
        self.span = span  # its `process {queue}` span when tracing
        self.context = None if span is None else span.context  # the handler runs in it


class Worker:
    """Runs `handler(job)` for the jobs of `queue`, `concurrency` at a time.

    `handler` is an async function, or a plain function (run on the worker's threads,
    as many as the concurrency). Its return value is the RESULT; an exception FAILs
    the job (see `Retry`, `Discard`). Inside it, `job.progress(value)` and
    `job.log(line)` report with the job's token (awaited in an async handler).
    `on_completed(job, result)` is called once the server accepted a COMPLETE, with
    the handler's return value; `on_failed(job, error)` once it accepted a FAIL, with
    the handler's exception (a TimeoutError past `timeout_ms`); either may be async.
    Neither is called for a lost lease or a requeue. `lease_ms` is the lease each
    claim and heartbeat asks for; `timeout_ms` (None = no limit) is how long a
    handler may run; `grace_ms` is how long running jobs may finish after
    SIGINT/SIGTERM; `block_ms` is how long one CLAIM parks on the server (a stop
    waits for the parked claim, so shutdown takes at least that long when it is
    longer than the grace); `beat_ms` is how often it asks the server whether an
    operator wants it quiet or stopped (EMQ.BEAT).

    `queue` is a `Queue`: the worker opens two connections of its own to the
    queue's server (link.py), whatever the concurrency. (The tests give it a fake
    with the same methods, which it then calls directly.)
    """

    def __init__(self, queue: Any, handler: Handler, *, concurrency: int = 10,
                 lease_ms: int = 30000, timeout_ms: int | None = None, grace_ms: int = 10000,
                 block_ms: int = 1000, on_completed: Hook | None = None,
                 on_failed: Hook | None = None, beat_ms: int = BEAT_MS) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if lease_ms < 3:
            raise ValueError("lease_ms must be >= 3")
        if timeout_ms is not None and timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive or None")
        if grace_ms < 0 or block_ms < 1 or beat_ms < 1:
            raise ValueError("grace_ms must be >= 0, block_ms and beat_ms >= 1")
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.timeout_ms = timeout_ms
        self.grace_ms = grace_ms
        self.block_ms = block_ms
        self.on_completed = on_completed
        self.on_failed = on_failed
        self.beat_ms = beat_ms
        self.name: str | None = None  # its connections' name (worker_name), once run() made it
        self.order = "run"  # what an operator asked of it last: run, quiet or stop
        self.counts = Counts()
        self.running: dict[str, JobRun] = {}
        self.link: Any = None  # made by run(): the queue's Link, or the fake queue itself
        self._loop: asyncio.AbstractEventLoop | None = None
        # Made afresh by each run(); an Event binds to no loop until it is awaited.
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._may_claim = asyncio.Event()  # clear while quiet
        self._resync_needed = False
        self._grace_ends = 0.0  # set by stop(); 0 (no grace) when the claimer itself failed
        self._fatal: PermanentError | None = None  # why the worker gave up, raised by run()
        # A lost connection marks itself broken and the next verb opens a new one, so an
        # outage has nothing to close (reconnect.Outage's on_lost).
        self.outage = Outage(log, f"worker of {queue!r}")
        self._reporter: ThroughWorker | None = None
        self._threads: handlers.Threads | None = None
        self._hooks: set[asyncio.Future[Any]] = set()
        self._keeper: Keeper | None = None

    # --- life ----------------------------------------------------------------------------
    async def run(self) -> Counts:
        """Work until `stop()` (or SIGINT/SIGTERM), then drain; returns the counts.

        Raises `PermanentError` (after draining) when the server refused the worker
        for good: a wrong or missing password, or an error reply to CLAIM such as an
        option it does not know. A lost connection is retried, never raised."""
        self._stopping, self._hurry, self._slot_freed, self._may_claim = (
            asyncio.Event(), asyncio.Event(), asyncio.Event(), asyncio.Event())
        self._may_claim.set()
        self.order = "run"
        self._loop = loop = asyncio.get_running_loop()
        self.link = self._link()
        self._reporter = ThroughWorker(self.link, loop, self._report)
        if isinstance(self.link, Link):
            self.link.reporter = self._reporter  # its claims make the jobs with it
            self._keeper = Keeper.start(self.link.endpoint.settings(), self.link.commands.key,
                                        self.lease_ms, self.timeout_ms)
        if not handlers.is_async(self.handler):
            self._threads = handlers.Threads(self.handler, loop, self._handed_back)
        signals = self._install_signals(loop)
        heartbeat = asyncio.ensure_future(self._heartbeats())
        beats = None if self.name is None else asyncio.ensure_future(self._beats(self.name))
        try:
            try:
                await self._claim_loop()
            finally:
                await self._drain()
        finally:
            heartbeat.cancel()
            if beats is not None:
                beats.cancel()
            for sig in signals:
                loop.remove_signal_handler(sig)
            if self._threads is not None:
                self._threads.close()
            if isinstance(self.link, Link):
                self.link.close()
            if self._keeper is not None:
                self._keeper.close()
        if self._fatal is not None:
            raise self._fatal
        return self.counts

    def run_sync(self) -> Counts:
        """`run()` in a fresh event loop (uvloop's), closing the queue's connections
        after."""
        async def main() -> Counts:
            try:
                return await self.run()
            finally:
                await self.queue.aclose()
        import uvloop  # here: the Worker itself runs on whatever loop it is given
        return uvloop.run(main())

    def stop(self) -> None:
        """Stop claiming and drain; a second call ends the grace period at once.
        Safe to call from another thread."""
        loop = self._loop
        if loop is None:
            return
        try:
            in_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            in_loop = False
        if not in_loop:
            loop.call_soon_threadsafe(self.stop)
            return
        if self._stopping.is_set():
            log.warning("stopping now: requeueing %d running job(s)", len(self.running))
            self._hurry.set()
        else:
            log.info("stopping: no new claims, %d running job(s) get %d ms",
                     len(self.running), self.grace_ms)
            self._grace_ends = time.monotonic() + self.grace_ms / 1000
            self._stopping.set()

    def _link(self) -> Any:
        """The connections the worker sends through: a Link to a real queue's server,
        named after this worker (emqd/sessions/worker_name.py); a fake queue is used as it is."""
        if getattr(self.queue, "client", None) is None:
            return self.queue
        self.name = worker_name.build(socket.gethostname(), os.getpid(), [self.queue.name],
                                      self.concurrency, int(time.time() * 1000))
        return Link(self.queue, self.name)

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        installed: list[int] = []
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self.stop)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or no signals here: stop() still works
            installed.append(sig)
        return installed

    # --- claiming ------------------------------------------------------------------------
    async def _claim_loop(self) -> None:
        backoff = Backoff()
        batch_most = max(1, math.ceil(self.concurrency * CLAIM_SHARE))
        while not self._stopping.is_set():
            free = self.concurrency - len(self.running)
            if free <= 0:
                self._slot_freed.clear()
                await self._first_of(self._slot_freed, self._stopping)
                continue
            if not self._may_claim.is_set():  # quiet: until an operator says run
                await self._first_of(self._may_claim, self._stopping)
                continue
            try:
                if self._resync_needed:
                    await self._resync()
                trace_api = tracing.trace_api()
                jobs = await self.link.claim(self.lease_ms, count=min(free, batch_most),
                                             block_ms=self.block_ms,
                                             with_trace=trace_api is not None)
            except (*TRANSPORT_ERRORS, ResponseError) as error:
                if is_permanent(error):
                    self._give_up("claim", error)
                    return
                delay = backoff.next()
                self._retrying("claim", error, delay)
                await self._first_of(self._stopping, timeout=delay)
                continue
            backoff.reset()
            self.outage.answered()
            if self._keeper is not None:
                self._keeper.tell(self.link.client_ids(), self.link.where().settings())
            for job in jobs:
                self._start(job, trace_api)

    async def _resync(self) -> None:
        """After a reconnect: confirm every held lease before claiming more. A lease the
        server recovered meanwhile answers EMQSTALE and its run is dropped, so the same
        job cannot run here twice. Raises a transport error while the server is away."""
        await self.link.ping()
        held = [run for run in self.running.values() if not run.ended]
        replies = await asyncio.gather(*(self.link.extend(run.job, self.lease_ms)
                                         for run in held), return_exceptions=True)
        for run, reply in zip(held, replies, strict=True):
            if isinstance(reply, TRANSPORT_ERRORS):
                raise reply  # the claim loop logs it and retries
            if isinstance(reply, BaseException):
                self._extended(run, reply)
        self._resync_needed = False
        self.counts.reconnects += 1
        log.debug("reconnected, %d lease(s) confirmed: %r", len(held), self.queue)

    def _start(self, job: Job, trace_api: Any) -> None:
        """Run `job`, in a `process` span when `trace_api` (tracing was on at its claim)."""
        self.counts.claimed += 1
        previous = self.running.get(job.id)
        if previous is not None:
            # The server gave this job out again: our old lease is over.
            self._lose(previous, "claimed again while still running here")
        if job.reporter is not self._reporter:
            job = dataclasses.replace(job, reporter=self._reporter)  # job.progress, ...
        span = None if trace_api is None else tracing.processing(trace_api, self.queue.name, job)
        run = JobRun(job, span)
        self.running[job.id] = run
        if self._stopping.is_set():
            self._end(run, outcome.REQUEUE)  # claimed while stopping: straight back
            return
        if self._threads is not None:
            self._threads.submit(run)
        else:
            run.task = task = self._live_loop.create_task(
                self.handler(job), context=run.context)
            task.add_done_callback(functools.partial(self._handler_done, run))
        if self.timeout_ms is not None:
            run.timer = self._live_loop.call_later(
                self.timeout_ms / 1000, self._time_out, run)

    # --- one job -------------------------------------------------------------------------
    @property
    def _live_loop(self) -> asyncio.AbstractEventLoop:
        """The loop run() runs on: a job exists only inside run()."""
        assert self._loop is not None
        return self._loop

    @property
    def _cancelled(self) -> set[tuple[str, str]]:
        """The (id, token) of the runs EMQ.CANCEL ended, as run()'s reporter holds them."""
        assert self._reporter is not None
        return self._reporter.cancelled

    def _handler_done(self, run: JobRun, task: asyncio.Future[Any]) -> None:
        self._end(run, outcome.for_handler(task))  # also reads a dropped run's exception
        self._cancelled.discard((run.job.id, run.job.token))

    def _handed_back(self, batch: list[handlers.Done]) -> None:
        """Plain handlers' results, a batch from the threads (a dropped run's is ignored)."""
        cancelled = self._cancelled
        for run, value, error in batch:
            if not run.ended:
                self._end(run, outcome.for_return(value, error))
            cancelled.discard((run.job.id, run.job.token))

    def _end(self, run: JobRun, settlement: outcome.Settlement | None,
             unsent: str = "lost") -> bool:
        """The run ends with `settlement` (or outcome.LOST: nothing is sent, and its span
        ends `unsent`); True when this call decided it. Stops what still runs for it (a
        thread is only detached)."""
        if run.ended:
            return False
        run.ended = True
        if run.timer is not None:
            run.timer.cancel()
        if run.task is not None and not run.task.done():
            run.task.cancel()
        if settlement is outcome.LOST:
            self._release(run, unsent)
        else:
            patience_s = SHUTDOWN_SETTLE_S if self._stopping.is_set() else self.lease_ms / 1000
            self._settle(run, settlement, time.monotonic() + patience_s)
        return True

    def _time_out(self, run: JobRun) -> None:
        if self._end(run, outcome.timed_out(self.timeout_ms or 0)):
            self.counts.timed_out += 1
            log.warning("job %s: handler ran past %d ms; failing it", run.job.id, self.timeout_ms)

    def _settle(self, run: JobRun, settlement: outcome.Settlement, deadline: float) -> None:
        """Send the settling verb; `_settled` hears how it went."""
        sent = asyncio.ensure_future(settlement.send(self.link, run.job))
        sent.add_done_callback(functools.partial(self._settled, run, settlement, deadline))

    def _settled(self, run: JobRun, settlement: outcome.Settlement, deadline: float,
                 sent: asyncio.Future[Any]) -> None:
        """The settling verb's answer: accepted (counted, the hook told), refused (the
        lease is gone, or this job's own refusal: logged), or not sent for want of the
        server (sent again, backing off, while the lease could still be ours)."""
        error = sent.exception()
        ended = "unsettled"  # the span's outcome, unless one of the verdicts below
        if error is None:
            self.outage.answered()
            ended = self._count_settled(settlement, sent.result())
            self._tell(run.job, settlement)
        elif isinstance(error, StaleJob):
            if run.backoff is not None and isinstance(settlement, outcome.Complete):
                self._confirm(run, settlement, error)
                return
            self._count_lost(run, str(error))
            ended = "lost"
        elif isinstance(error, JobCancelled):  # the cancel came first: the result is dropped
            self._count_cancelled(run, error)
            ended = "cancelled"
        elif isinstance(error, (*TRANSPORT_ERRORS, ResponseError)):
            verb = type(settlement).__name__.upper()
            if isinstance(error, AuthenticationError):
                self._give_up(verb, error)
            elif is_permanent(error):  # this job's own refusal: log it, go on
                log.error("job %s: %s refused: %s", run.job.id, verb, error)
            elif time.monotonic() >= deadline:
                log.error("job %s: gave up settling (%s); the server will recover it",
                          run.job.id, verb)
            else:
                run.backoff = run.backoff or Backoff()
                delay = run.backoff.next()
                self._retrying(f"job {run.job.id}: {verb}", error, delay)
                self._live_loop.call_later(
                    delay, self._settle, run, settlement, deadline)
                return
        else:
            log.error("job %s: unexpected worker error (%r); the server will recover it",
                      run.job.id, error)
        cause = settlement.cause if isinstance(settlement, outcome.Fail) else None
        self._release(run, ended, cause)

    def _confirm(self, run: JobRun, settlement: outcome.Complete, stale: StaleJob) -> None:
        """A COMPLETE sent again, after its first sending's answer was lost, met EMQSTALE:
        the first may have taken effect (its front applied it, then died before
        answering). The row tells: completed under this run's token, only this run
        could have completed it, so it did (counted, `on_completed` told); anything
        else (another state or token, the row gone, no answer) is a lost lease."""
        looked = asyncio.ensure_future(self.link.get(run.job.id))
        looked.add_done_callback(functools.partial(self._confirmed, run, settlement, stale))

    def _confirmed(self, run: JobRun, settlement: outcome.Complete, stale: StaleJob,
                   looked: asyncio.Future[JobInfo | None]) -> None:
        row = None if looked.cancelled() or looked.exception() is not None else looked.result()
        if (row is not None and row.state == "completed"
                and row.fields.get("attempts") == run.job.token.encode()):
            log.info("job %s (token %s): its first COMPLETE took effect (the retry met %s)",
                     run.job.id, run.job.token, stale)
            ended = self._count_settled(settlement, None)
            self._tell(run.job, settlement)
        else:
            self._count_lost(run, str(stale))
            ended = "lost"
        self._release(run, ended)

    def _release(self, run: JobRun, ended: str, error: BaseException | None = None) -> None:
        """The run is over: its slot is free; its span (when tracing) ends `ended`."""
        if self.running.get(run.job.id) is run:
            del self.running[run.job.id]
        if run.span is not None:
            run.span.end(ended, error)
        self._slot_freed.set()

    # --- heartbeats ----------------------------------------------------------------------
    async def _heartbeats(self) -> None:
        """Every third of the lease, EXTEND every lease held (one pipelined write); every
        sixth, tell the lease keeper the loop runs (emqd/client/lease_keeper.py: it extends them
        itself while the loop cannot, a handler holding the GIL)."""
        for tick in itertools.count(1):
            if self._keeper is not None:
                self._keeper.beat(self.link.client_ids())
            await asyncio.sleep(self.lease_ms / 6000)
            if tick % 2:
                continue
            for run in list(self.running.values()):
                if not run.ended:
                    extended = asyncio.ensure_future(self.link.extend(run.job, self.lease_ms))
                    extended.add_done_callback(
                        lambda done, run=run: self._extended(run, done.exception()))

    def _extended(self, run: JobRun, error: BaseException | None) -> None:
        if error is None:
            self.outage.answered()
        elif isinstance(error, StaleJob):
            self._lose(run, str(error))
        elif isinstance(error, JobCancelled):
            self._cancel(run, error)
        elif isinstance(error, AuthenticationError):
            self._give_up("extend", error)
        elif isinstance(error, TRANSPORT_ERRORS):
            self._resync_needed = True
            self.outage.failed(f"job {run.job.id}: extend", error, self.lease_ms / 3000)
        elif isinstance(error, ResponseError):  # not ours to fix; the handler's work goes on
            log.error("job %s: EXTEND refused: %s", run.job.id, error)
        else:
            log.error("job %s: EXTEND failed: %r", run.job.id, error)

    # --- what an operator asks -----------------------------------------------------------
    async def _beats(self, name: str) -> None:
        """Every `beat_ms`, EMQ.BEAT: `quiet` stops the claims until `run` again, `stop`
        stops the worker as SIGTERM does. A lost connection skips a beat (the claimer
        and the heartbeat ride the outage out); a server that refuses the verb (older
        than issue 38) is told nothing more."""
        while not self._stopping.is_set():
            await self._first_of(self._stopping, timeout=self.beat_ms / 1000)
            if self._stopping.is_set():
                return
            try:
                order = await self.link.beat(name)
            except (*TRANSPORT_ERRORS, *NOT_NOW):
                continue
            except ResponseError as error:
                log.warning("EMQ.BEAT refused (%s): quiet and stop from the dashboard "
                            "will not reach this worker", error)
                return
            self._obey(order)

    def _obey(self, order: str) -> None:
        if order == self.order:
            return
        log.info("asked to %s (was %s)", order, self.order)
        self.order = order
        if order == "quiet":
            self._may_claim.clear()
        elif order == "stop":
            self.stop()
        else:
            self._may_claim.set()

    # --- reports from the handler --------------------------------------------------------
    async def _report(self, job: Job, make: Callable[[], Awaitable[T]]) -> T:
        """A handler's report (progress, log, children) for `job`. A lost connection, or
        a "not now" refusal, is the worker's to ride out, never the job's failure: the
        report is sent again once the server is back, the handler waiting meanwhile, for
        as long as the run lasts. StaleJob (the lease is gone, also when the run ended
        meanwhile) reaches the handler and drops the run; any other refusal of the
        report itself reaches the handler as before."""
        run = self.running.get(job.id)
        backoff = Backoff()
        while True:
            if job.cancelled:
                raise JobCancelled(f"job {job.id} was cancelled")
            if run is None or run.ended or run.job.token != job.token:
                raise StaleJob(f"job {job.id}: the run ended while its report waited")
            try:
                result = await make()
            except StaleJob as error:
                self._lose(run, str(error))
                raise
            except JobCancelled as error:
                self._cancel(run, error)
                raise
            except (*TRANSPORT_ERRORS, ResponseError) as error:
                if isinstance(error, AuthenticationError):
                    self._give_up("report", error)
                    raise
                if is_permanent(error):
                    raise
                delay = backoff.next()
                self._retrying(f"job {job.id}: report", error, delay)
                await asyncio.sleep(delay)
                continue
            self.outage.answered()
            return result

    # --- outcomes ------------------------------------------------------------------------
    def _lose(self, run: JobRun, why: str) -> None:
        """The lease is gone: log once, send nothing more for this run."""
        if self._end(run, outcome.LOST):
            self._count_lost(run, why)

    def _cancel(self, run: JobRun, error: JobCancelled) -> None:
        """EMQ.CANCEL ended the job: stop its handler (an async one's task is cancelled; a
        plain one sees `job.cancelled`), send nothing more about it."""
        if not run.ended:
            self._cancelled.add((run.job.id, run.job.token))
        if self._end(run, outcome.LOST, "cancelled"):
            self._count_cancelled(run, error)

    def _count_cancelled(self, run: JobRun, error: JobCancelled) -> None:
        self.counts.cancelled += 1
        log.info("job %s (token %s): %s; its run is stopped", run.job.id, run.job.token, error)

    def _count_lost(self, run: JobRun, why: str) -> None:
        self.counts.lost += 1
        log.warning("job %s (token %s): lease lost (%s); dropping it",
                    run.job.id, run.job.token, why)

    def _tell(self, job: Job, settlement: outcome.Settlement) -> None:
        """The hook of a settlement the server accepted; what it raises is only logged."""
        if isinstance(settlement, outcome.Complete):
            hook, detail = self.on_completed, settlement.result
        elif isinstance(settlement, outcome.Fail):
            hook, detail = self.on_failed, settlement.cause
        else:
            return
        if hook is None:
            return
        try:
            called = hook(job, detail)
        except Exception:
            log.exception("job %s: the %s hook raised", job.id, hook.__name__)
            return
        if inspect.isawaitable(called):
            told = asyncio.ensure_future(called)
            self._hooks.add(told)
            told.add_done_callback(functools.partial(self._told, job, hook))

    def _told(self, job: Job, hook: Hook, told: asyncio.Future[Any]) -> None:
        self._hooks.discard(told)
        if not told.cancelled() and told.exception() is not None:
            log.error("job %s: the %s hook raised", job.id, hook.__name__,
                      exc_info=told.exception())

    def _count_settled(self, settlement: outcome.Settlement, reply: Any) -> str:
        """Count an accepted settlement; what it was (the span's `emqd.outcome`)."""
        if isinstance(settlement, outcome.Complete):
            self.counts.completed += 1
            return "completed"
        if isinstance(settlement, outcome.Fail):
            self.counts.failed += 1
            self.counts.dead += bool(reply.dead)
            return "failed"
        if settlement.delay_ms:
            self.counts.snoozed += 1
            return "snoozed"
        self.counts.requeued += 1
        return "requeued"

    def _retrying(self, what: str, error: BaseException, delay_s: float) -> None:
        """Note one retry (the outage's first is a WARNING, the rest DEBUG); after a lost
        connection, held leases are confirmed before the next claim."""
        if isinstance(error, TRANSPORT_ERRORS):
            self._resync_needed = True
        self.outage.failed(what, error, delay_s)

    def _give_up(self, what: str, error: BaseException) -> None:
        """A permanent refusal: stop now, without grace (nothing could be settled)."""
        if self._fatal is None:
            self._fatal = PermanentError(what, error)
            log.error("%s; stopping", self._fatal)
        self._grace_ends = 0.0
        self._stopping.set()
        self._hurry.set()

    # --- stopping ------------------------------------------------------------------------
    async def _drain(self) -> None:
        """Running jobs get what is left of the grace period (it began at stop(), while
        the last claim was still parked); then whatever still runs is REQUEUEd, and the
        settling verbs and hooks in flight are waited for."""
        left_s = max(0.0, self._grace_ends - time.monotonic())
        deadline = time.monotonic() + left_s
        while self.running and not self._hurry.is_set() and time.monotonic() < deadline:
            self._slot_freed.clear()
            await self._first_of(self._slot_freed, self._hurry,
                                 timeout=deadline - time.monotonic())
        for run in list(self.running.values()):
            self._end(run, outcome.REQUEUE)
        while self.running:
            self._slot_freed.clear()
            await self._slot_freed.wait()
        if self._hooks:
            await asyncio.wait(list(self._hooks))

    async def _first_of(self, *waitables: asyncio.Event | asyncio.Future[Any],
                        timeout: float | None = None) -> None:
        """Wait until any event is set or future done, or the timeout passes."""
        waiters = [asyncio.ensure_future(w.wait()) if isinstance(w, asyncio.Event) else w
                   for w in waitables]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter, source in zip(waiters, waitables, strict=True):
                if waiter is not source:
                    waiter.cancel()
