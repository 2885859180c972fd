"""The `emqd-worker` command: run a handler function as a Worker, with a progress line.

    emqd-worker module:function --queue NAME [--url redis://HOST:PORT] [--concurrency N]

The current directory is put on the import path first, so `emqd-worker
tasks:send_mail` finds ./tasks.py as `python -m` would. Every
`--progress-interval` seconds it prints one line to stderr: jobs done, failed
and the rate since the previous line. SIGINT/SIGTERM stop it gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from emqd.client.queue import DEFAULT_URL, URL_ENV, Queue
from emqd.client.worker import Counts, Worker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="emqd-worker", description="Run a handler function over an emqd queue.")
    parser.add_argument("handler", help="module:function (async or plain) taking a Job")
    parser.add_argument("--queue", required=True, help="queue name")
    parser.add_argument("--url", default=None,
                        help=f"server URL (default ${URL_ENV}, else {DEFAULT_URL})")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--lease-ms", type=int, default=30000)
    parser.add_argument("--timeout-ms", type=int, default=None)
    parser.add_argument("--grace-ms", type=int, default=10000)
    parser.add_argument("--progress-interval", type=float, default=10.0,
                        help="seconds between progress lines (0 = none)")
    parser.add_argument("--loglevel", default="info", choices=["debug", "info", "warning"])
    return parser


def load_handler(spec: str) -> Callable[..., Any]:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"emqd-worker: handler must be module:function, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise SystemExit(f"emqd-worker: {spec} is not callable")
    return target


def progress_line(queue: str, counts: Counts, done_before: int, elapsed_s: float) -> str:
    """`done` counts COMPLETEs, `failed` FAILs; the rate is settled jobs per second
    since the previous line."""
    settled = counts.completed + counts.failed
    rate = (settled - done_before) / elapsed_s if elapsed_s > 0 else 0.0
    return (f"emqd-worker {queue}: done={counts.completed} failed={counts.failed} "
            f"dead={counts.dead} lost={counts.lost} rate={rate:.1f}/s")


async def report_progress(worker: Worker, interval_s: float) -> None:
    before, since = 0, time.monotonic()
    while True:
        await asyncio.sleep(interval_s)
        now = time.monotonic()
        print(progress_line(worker.queue.name, worker.counts, before, now - since),
              file=sys.stderr, flush=True)
        before, since = worker.counts.completed + worker.counts.failed, now


async def serve(worker: Worker, progress_interval_s: float) -> Counts:
    reporter = (asyncio.create_task(report_progress(worker, progress_interval_s))
                if progress_interval_s > 0 else None)
    try:
        return await worker.run()
    finally:
        if reporter is not None:
            reporter.cancel()
        await worker.queue.aclose()


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.loglevel.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    handler = load_handler(args.handler)
    worker = Worker(Queue(args.queue, args.url), handler, concurrency=args.concurrency,
                    lease_ms=args.lease_ms, timeout_ms=args.timeout_ms, grace_ms=args.grace_ms)
    started = time.monotonic()
    counts = asyncio.run(serve(worker, args.progress_interval))
    print(progress_line(args.queue, counts, 0, time.monotonic() - started),
          file=sys.stderr, flush=True)
