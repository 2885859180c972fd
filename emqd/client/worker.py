"""The Worker: claim jobs, run the handler, keep the lease alive, settle, stop cleanly.

Shape (each piece small, the decisions in outcome.py):
- one claimer asks EMQ.CLAIM for as many jobs as there are free slots, with
  BLOCK, so an idle worker parks on the server instead of polling;
- each claimed job is a `JobRun`: the handler, a heartbeat that EXTENDs the
  lease every third of it, and an optional timeout timer. Whichever ends the
  run first (handler done, timeout, lost lease, shutdown) picks the
  settlement, and the run sends that one verb;
- on SIGINT/SIGTERM the claimer stops, running jobs get `grace_ms` to finish,
  and the rest are REQUEUEd;
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
meanwhile answers EMQSTALE and its result is dropped, charging nothing. The
outage is logged once when it begins and once when it ends (reconnect.Outage).

The worker names its connections (CLIENT SETNAME, emqd/worker_name.py), so the
dashboard's Workers page shows it with the jobs it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.exceptions import AuthenticationError, ResponseError

from emqd import __version__, worker_name
from emqd.client import handler as handlers
from emqd.client import outcome
from emqd.client.commands import Job
from emqd.client.errors import TRANSPORT_ERRORS, PermanentError, StaleJob, is_permanent
from emqd.client.handler import Handler, ThroughWorker
from emqd.client.reconnect import Backoff, Outage

log = logging.getLogger("emqd.worker")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: `on_completed(job, result)`, `on_failed(job, error)`: a function or an async function.
Hook = Callable[[Job, Any], Any]
#: How long a settling verb is retried over a lost connection once stopping, so
#: that shutdown stays bounded (the server's sweep recovers what is left).
SHUTDOWN_SETTLE_S = 2.0
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
    lost: int = 0
    reconnects: int = 0


class JobRun:
    """One claimed job, from claim to settlement. `ending` resolves once, to the
    settlement of whichever event came first (or outcome.LOST)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.ending: asyncio.Future[outcome.Settlement | None] = (
            asyncio.get_running_loop().create_future())
        self.task: asyncio.Task[None] | None = None

    def end(self, settlement: outcome.Settlement | None) -> bool:
        """True when this call decided the ending; later events are ignored."""
        if self.ending.done():
            return False
        self.ending.set_result(settlement)
        return True

    @property
    def ended(self) -> bool:
        return self.ending.done()


class Worker:
    """Runs `handler(job)` for the jobs of `queue`, `concurrency` at a time.

    `handler` is an async function, or a plain function (run in a thread). Its
    return value is the RESULT; an exception FAILs the job (see `Retry`,
    `Discard`). Inside it, `job.progress(value)` and `job.log(line)` report with
    the job's token (awaited in an async handler). `on_completed(job, result)` is
    called once the server accepted a COMPLETE, with the handler's return value;
    `on_failed(job, error)` once it accepted a FAIL, with the handler's
    exception (a TimeoutError past `timeout_ms`); either may be async. Neither is
    called for a lost lease or a requeue. `lease_ms` is the lease each claim and heartbeat asks for;
    `timeout_ms` (None = no limit) is how long a handler may run; `grace_ms`
    is how long running jobs may finish after SIGINT/SIGTERM; `block_ms` is how
    long one CLAIM parks on the server (a stop waits for the parked claim, so
    shutdown takes at least that long when it is longer than the grace).
    """

    def __init__(self, queue: Any, handler: Handler, *, concurrency: int = 10,
                 lease_ms: int = 30000, timeout_ms: int | None = None, grace_ms: int = 10000,
                 block_ms: int = 1000, on_completed: Hook | None = None,
                 on_failed: Hook | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if lease_ms < 3:
            raise ValueError("lease_ms must be >= 3")
        if timeout_ms is not None and timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive or None")
        if grace_ms < 0 or block_ms < 1:
            raise ValueError("grace_ms must be >= 0 and block_ms >= 1")
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.timeout_ms = timeout_ms
        self.grace_ms = grace_ms
        self.block_ms = block_ms
        self.on_completed = on_completed
        self.on_failed = on_failed
        self.counts = Counts()
        self.running: dict[str, JobRun] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # Made afresh by each run(); an Event binds to no loop until it is awaited.
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._resync_needed = False
        self._grace_ends = 0.0  # set by stop(); 0 (no grace) when the claimer itself failed
        self._fatal: PermanentError | None = None  # why the worker gave up, raised by run()
        self.outage = Outage(log, f"worker of {queue!r}", self._close_idle_connections)
        self._closing: asyncio.Future[Any] | None = None

    # --- life ----------------------------------------------------------------------------
    async def run(self) -> Counts:
        """Work until `stop()` (or SIGINT/SIGTERM), then drain; returns the counts.

        Raises `PermanentError` (after draining) when the server refused the worker
        for good: a wrong or missing password, or an error reply to CLAIM such as an
        option it does not know. A lost connection is retried, never raised."""
        self._stopping, self._hurry, self._slot_freed = (
            asyncio.Event(), asyncio.Event(), asyncio.Event())
        self._loop = loop = asyncio.get_running_loop()
        await self._name_connections()
        signals = self._install_signals(loop)
        try:
            try:
                await self._claim_loop()
            finally:
                await self._drain()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
        if self._fatal is not None:
            raise self._fatal
        return self.counts

    def run_sync(self) -> Counts:
        """`run()` in a fresh event loop, closing the queue's connections after."""
        async def main() -> Counts:
            try:
                return await self.run()
            finally:
                await self.queue.aclose()
        return asyncio.run(main())

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

    async def _name_connections(self) -> None:
        """CLIENT SETNAME on every connection of the queue's pool (emqd/worker_name.py), and
        emqd in CLIENT SETINFO's lib-name: idle connections made before are closed, so the
        next ones are named. A queue that is not redis-py's (a test's fake) is left alone."""
        pool = self._pool()
        if pool is None:
            return
        pool.connection_kwargs["client_name"] = worker_name.build(
            socket.gethostname(), os.getpid(), [self.queue.name], self.concurrency,
            int(time.time() * 1000))
        info = pool.connection_kwargs.get("driver_info")
        if info is not None and "emqd" not in info.formatted_name:
            info.add_upstream_driver("emqd", __version__)
        await pool.disconnect(inuse_connections=False)

    def _close_idle_connections(self) -> None:
        """The outage's `on_lost` (reconnect.Outage): idle connections are closed."""
        pool = self._pool()
        if pool is not None:
            self._closing = asyncio.ensure_future(pool.disconnect(inuse_connections=False))

    def _pool(self) -> Any:
        """The queue's redis-py connection pool; None for a queue that is not redis-py's."""
        return getattr(getattr(self.queue, "client", None), "connection_pool", None)

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
        while not self._stopping.is_set():
            free = self.concurrency - len(self.running)
            if free <= 0:
                self._slot_freed.clear()
                await self._first_of(self._slot_freed, self._stopping)
                continue
            try:
                if self._resync_needed:
                    await self._resync()
                jobs = await self.queue.claim(self.lease_ms, count=free, block_ms=self.block_ms)
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
            for job in jobs:
                self._start(job)

    async def _resync(self) -> None:
        """After a reconnect: confirm every held lease before claiming more. A lease the
        server recovered meanwhile answers EMQSTALE and its run is dropped, so the same
        job cannot run here twice. Raises a transport error while the server is away."""
        await self.queue.ping()
        for run in list(self.running.values()):
            if not run.ended:
                await self._extend(run, raise_transport=True)
        self._resync_needed = False
        self.counts.reconnects += 1
        log.debug("reconnected, %d lease(s) confirmed: %r", len(self.running), self.queue)

    def _start(self, job: Job) -> None:
        self.counts.claimed += 1
        previous = self.running.get(job.id)
        if previous is not None:
            # The server gave this job out again: our old lease is over.
            self._lose(previous, "claimed again while still running here")
        run = JobRun(job)
        run.job = dataclasses.replace(job, reporter=ThroughWorker(  # job.progress, ...
            self.queue, asyncio.get_running_loop(), lambda make: self._report(run, make)))
        job = run.job
        self.running[job.id] = run
        if self._stopping.is_set():
            run.end(outcome.REQUEUE)  # claimed while stopping: straight back
        run.task = asyncio.create_task(self._run_job(run), name=f"emqd-job-{job.id}")

    # --- one job -------------------------------------------------------------------------
    async def _run_job(self, run: JobRun) -> None:
        loop = asyncio.get_running_loop()
        handler_future = None if run.ended else handlers.start(self.handler, run.job)
        heartbeat = timer = None
        if handler_future is not None:
            handler_future.add_done_callback(lambda done: run.end(outcome.for_handler(done)))
            heartbeat = asyncio.create_task(self._heartbeat(run))
            if self.timeout_ms is not None:
                timer = loop.call_later(self.timeout_ms / 1000, self._time_out, run)
        try:
            settlement = await run.ending
            for cleanup in (heartbeat, timer, handler_future):
                if cleanup is not None:
                    cleanup.cancel()  # a sync handler's thread is detached, not stopped
            if heartbeat is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            if handler_future is not None:
                handler_future.add_done_callback(_consume)
            if settlement is not outcome.LOST:
                await self._settle(run, settlement)
        except Exception:
            log.exception("job %s: unexpected worker error; the server will recover it",
                          run.job.id)
        finally:
            if self.running.get(run.job.id) is run:
                del self.running[run.job.id]
            self._slot_freed.set()

    def _time_out(self, run: JobRun) -> None:
        if run.end(outcome.timed_out(self.timeout_ms or 0)):
            self.counts.timed_out += 1
            log.warning("job %s: handler ran past %d ms; failing it", run.job.id, self.timeout_ms)

    async def _heartbeat(self, run: JobRun) -> None:
        interval = self.lease_ms / 3000
        while not run.ended:
            await asyncio.sleep(interval)
            await self._extend(run, raise_transport=False)

    async def _extend(self, run: JobRun, *, raise_transport: bool) -> None:
        try:
            await self.queue.extend(run.job, self.lease_ms)
        except StaleJob as error:
            self._lose(run, str(error))
        except AuthenticationError as error:
            self._give_up("extend", error)
        except TRANSPORT_ERRORS as error:
            self._resync_needed = True
            if raise_transport:
                raise  # the claim loop logs it and retries
            self.outage.failed(f"job {run.job.id}: extend", error, self.lease_ms / 3000)
        except ResponseError as error:  # not ours to fix; the handler's work goes on
            log.error("job %s: EXTEND refused: %s", run.job.id, error)
        else:
            self.outage.answered()

    async def _report(self, run: JobRun, make: Callable[[], Awaitable[T]]) -> T:
        """A handler's report (progress, log, children) for the job of `run`. A lost
        connection, or a "not now" refusal, is the worker's to ride out, never the job's
        failure: the report is sent again once the server is back, the handler waiting
        meanwhile, for as long as the run lasts. StaleJob (the lease is gone, also when
        the run ended meanwhile) reaches the handler and drops the run; any other
        refusal of the report itself reaches the handler as before."""
        backoff = Backoff()
        while True:
            if run.ended:
                raise StaleJob(f"job {run.job.id}: the run ended while its report waited")
            try:
                result = await make()
            except StaleJob as error:
                self._lose(run, str(error))
                raise
            except (*TRANSPORT_ERRORS, ResponseError) as error:
                if isinstance(error, AuthenticationError):
                    self._give_up("report", error)
                    raise
                if is_permanent(error):
                    raise
                delay = backoff.next()
                self._retrying(f"job {run.job.id}: report", error, delay)
                await self._first_of(run.ending, timeout=delay)
                continue
            self.outage.answered()
            return result

    def _lose(self, run: JobRun, why: str) -> None:
        """The lease is gone: log once, send nothing more for this run."""
        if run.end(outcome.LOST):
            self._count_lost(run, why)

    def _count_lost(self, run: JobRun, why: str) -> None:
        self.counts.lost += 1
        log.warning("job %s (token %s): lease lost (%s); dropping it",
                    run.job.id, run.job.token, why)

    async def _settle(self, run: JobRun, settlement: outcome.Settlement) -> None:
        """Send the settling verb, retrying only while the connection is down and the
        lease could still be ours."""
        patience_s = SHUTDOWN_SETTLE_S if self._stopping.is_set() else self.lease_ms / 1000
        deadline = time.monotonic() + patience_s
        backoff = Backoff()
        while True:
            try:
                reply = await settlement.send(self.queue, run.job)
                break
            except StaleJob as error:
                self._count_lost(run, str(error))
                return
            except (*TRANSPORT_ERRORS, ResponseError) as error:
                verb = type(settlement).__name__.upper()
                if isinstance(error, AuthenticationError):
                    self._give_up(verb, error)
                    return
                if is_permanent(error):  # this job's own refusal: log it, go on
                    log.error("job %s: %s refused: %s", run.job.id, verb, error)
                    return
                if time.monotonic() >= deadline:
                    log.error("job %s: gave up settling (%s); the server will recover it",
                              run.job.id, verb)
                    return
                delay = backoff.next()
                self._retrying(f"job {run.job.id}: {verb}", error, delay)
                await asyncio.sleep(delay)
        self.outage.answered()
        self._count_settled(settlement, reply)
        await self._tell(run.job, settlement)

    async def _tell(self, job: Job, settlement: outcome.Settlement) -> None:
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
            if inspect.isawaitable(called):
                await called
        except Exception:
            log.exception("job %s: the %s hook raised", job.id, hook.__name__)

    def _count_settled(self, settlement: outcome.Settlement, reply: Any) -> None:
        if isinstance(settlement, outcome.Complete):
            self.counts.completed += 1
        elif isinstance(settlement, outcome.Fail):
            self.counts.failed += 1
            self.counts.dead += bool(reply.dead)
        else:
            self.counts.requeued += 1

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
        the last claim was still parked); then whatever still runs is REQUEUEd."""
        runs = list(self.running.values())
        tasks = [run.task for run in runs if run.task is not None]
        if tasks:
            left_s = max(0.0, self._grace_ends - time.monotonic())
            waiter = asyncio.ensure_future(asyncio.wait(tasks))
            await self._first_of(self._hurry, waiter, timeout=left_s)
            waiter.cancel()
        for run in runs:
            run.end(outcome.REQUEUE)
        if tasks:
            await asyncio.wait(tasks)

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


def _consume(done: asyncio.Future[Any]) -> None:
    """Retrieve a detached handler's exception so asyncio does not report it as lost."""
    if not done.cancelled():
        done.exception()
