"""The `emqd-worker` command: run a handler function as a Worker, with a progress line.

    emqd-worker module:function --queue NAME [--url redis://HOST:PORT[,HOST:PORT...]]
                [--concurrency N]

The current directory is put on the import path first, so `emqd-worker
tasks:send_mail` finds ./tasks.py as `python -m` would. Every
`--progress-interval` seconds it prints one line to stderr: jobs done, failed
and the rate since the previous line. SIGINT/SIGTERM stop it gracefully.

Exit status: 0 after a graceful stop; 1 when the server refused the worker for
good (a wrong password, a refused queue) or the handler cannot be loaded; 2
for bad arguments. Each of those is one line on stderr that names the cause.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import uvloop

from emqd.client import supervisor
from emqd.client.addresses import DEFAULT_URL, URL_ENV, redacted
from emqd.client.errors import PermanentError
from emqd.client.queue import Queue
from emqd.client.worker import BEAT_MS, Counts, Worker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="emqd-worker", description="Run a handler function over an emqd queue.")
    parser.add_argument("handler", help="module:function (async or plain) taking a Job")
    parser.add_argument("--queue", required=True, help="queue name")
    parser.add_argument("--url", default=None,
                        help=f"server URL (default ${URL_ENV}, else {DEFAULT_URL}); in "
                        "cluster mode any front's, or several: redis://a:6390,b:6391")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="jobs run at once, per process (default 10)")
    parser.add_argument("--processes", type=int, default=1,
                        help="worker processes under one supervisor (default 1: no supervisor)")
    parser.add_argument("--lease-ms", type=int, default=30000)
    parser.add_argument("--timeout-ms", type=int, default=None)
    parser.add_argument("--grace-ms", type=int, default=10000)
    parser.add_argument("--beat-ms", type=int, default=BEAT_MS,
                        help="how often it asks whether an operator said quiet or stop "
                        f"(EMQ.BEAT; default {BEAT_MS})")
    parser.add_argument("--progress-interval", type=float, default=10.0,
                        help="seconds between progress lines (0 = none)")
    parser.add_argument("--loglevel", default="info", choices=["debug", "info", "warning"],
                        help="of the `emqd.worker` logger, on stderr (default info)")
    return parser


def load_handler(spec: str) -> Callable[..., Any]:
    """The function `module:function` names; any failure is one line naming `spec`
    (SystemExit with status 1), not a traceback."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"emqd-worker: handler must be module:function, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the module raised, named in one line
        raise SystemExit(f"emqd-worker: cannot import handler {spec}: "
                         f"{type(exc).__name__}: {exc}{_where(exc)}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SystemExit(f"emqd-worker: cannot find handler {spec}: "
                             f"{module_name} has no {attribute!r}") from None
    if not callable(target):
        raise SystemExit(f"emqd-worker: {spec} is not callable")
    return target  # type: ignore[no-any-return]


def _where(exc: BaseException) -> str:
    """` (tasks.py, line 3)`: the frame of the user's module that raised, if any."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}, line {exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename]
    return f" ({own[-1].filename}, line {own[-1].lineno})" if own else ""


def progress_line(queue: str, counts: Counts, done_before: int, elapsed_s: float) -> str:
    """`done` counts COMPLETEs, `failed` FAILs; the rate is settled jobs per second
    since the previous line."""
    settled = counts.completed + counts.failed
    rate = (settled - done_before) / elapsed_s if elapsed_s > 0 else 0.0
    return (f"emqd-worker {queue}: done={counts.completed} failed={counts.failed} "
            f"dead={counts.dead} lost={counts.lost} rate={rate:.1f}/s")


class Progress:
    """The progress lines of one run, the last one (at exit) included: each line's
    rate counts the jobs settled since the line before it."""

    def __init__(self, queue: str, counts: Counts, now_s: float) -> None:
        self.queue, self.counts = queue, counts
        self.settled, self.since = 0, now_s

    def line(self, now_s: float) -> str:
        text = progress_line(self.queue, self.counts, self.settled, now_s - self.since)
        self.settled, self.since = self.counts.completed + self.counts.failed, now_s
        return text


async def report_progress(progress: Progress, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        print(progress.line(time.monotonic()), file=sys.stderr, flush=True)


async def serve(worker: Worker, progress: Progress, progress_interval_s: float) -> Counts:
    reporter = (asyncio.create_task(report_progress(progress, progress_interval_s))
                if progress_interval_s > 0 else None)
    supervisor.watch_parent(worker.stop)  # a child of --processes: stop when it is gone
    try:
        return await worker.run()
    finally:
        if reporter is not None:
            reporter.cancel()
        await worker.queue.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    logging.basicConfig(level=args.loglevel.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    handler = load_handler(args.handler)
    try:
        worker = Worker(Queue(args.queue, args.url), handler, concurrency=args.concurrency,
                        lease_ms=args.lease_ms, timeout_ms=args.timeout_ms,
                        grace_ms=args.grace_ms, beat_ms=args.beat_ms)
    except ValueError as exc:  # a queue name, URL or setting refused before connecting
        parser.error(str(exc))
    if args.processes > 1:
        status = supervisor.Supervisor(supervisor.child_argv(given), args.processes,
                                       lambda line: print(line, file=sys.stderr,
                                                          flush=True)).run()
        raise SystemExit(status)
    label = worker.queue.name
    if os.environ.get(supervisor.PARENT_FD_ENV):  # one of --processes: say which
        label += f" (pid {os.getpid()})"
    progress = Progress(label, worker.counts, time.monotonic())
    try:
        uvloop.run(serve(worker, progress, args.progress_interval))
    except PermanentError as exc:
        raise SystemExit(f"emqd-worker: queue {worker.queue.name} on "
                         f"{redacted(worker.queue.url)}: {exc}") from None
    finally:
        print(progress.line(time.monotonic()), file=sys.stderr, flush=True)
