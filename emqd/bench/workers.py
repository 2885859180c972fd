"""The `worker` scenario: `emqd-worker` draining a preloaded queue, beside BullMQ's
Worker and Dramatiq's doing the same on a redis-server.

Each run preloads `worker_jobs` jobs of 100 bytes (untimed), starts the worker
as its own process with a no-op handler, and measures (emqd/bench/drain.py)
the drain rate and the worker's CPU a job from outside. emqd-worker runs with
an `async def` and a plain `def` handler at each concurrency, with one process
and with `--processes 2`; BullMQ's Worker (Node) at each concurrency where
Node and the `bullmq` package are found (`--bullmq-dir`, or $EMQD_BENCH_BULLMQ:
a directory whose node_modules holds bullmq and ioredis), Dramatiq's at
`--threads 50` where the `dramatiq` package is installed; otherwise each says
why it was skipped.

The workers run on the client's CPU (CPU 1) and the servers on CPU 0, as the
other scenarios run; `--processes 2` may use both cores, which is what it is for.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from emqd.bench import scenarios
from emqd.bench.client import Client, ReplyError, encode
from emqd.bench.drain import Drain, DrainError, watch
from emqd.bench.servers import EMQD_ROOT, Server
from emqd.bench.targets import Target
from emqd.layout import queue_keys

BULLMQ_ENV = "EMQD_BENCH_BULLMQ"
NODE_DIR = Path(__file__).resolve().parent / "node"  # package data: bullmq_worker.cjs
PROCESSES_AT = 50  # where --processes 2 and Dramatiq run (else at the first one given)
STALL_S = 20.0  # a run that finishes nothing for this long is void
STOP_S = 15.0


@dataclass(frozen=True)
class Run:
    """One configuration of one system: its key in the results, how to start it."""

    key: str  # e.g. "emqd.async.50", "emqd.sync.50.p2", "bullmq.50", "dramatiq.50"
    argv: list[str]
    env: dict[str, str]
    all_cpus: bool = False  # --processes 2: the whole machine


def emqd_runs(port: int, concurrencies: tuple[int, ...]) -> list[Run]:
    two_at = PROCESSES_AT if PROCESSES_AT in concurrencies else concurrencies[0]
    runs = []
    for kind in ("async", "sync"):
        for concurrency in concurrencies:
            for processes in (1, 2) if concurrency == two_at else (1,):
                key = f"emqd.{kind}.{concurrency}"
                if processes > 1:
                    key += f".p{processes}"
                runs.append(emqd_run_at(key, f"redis://127.0.0.1:{port}", kind, concurrency,
                                        processes))
    return runs


def emqd_run_at(key: str, url: str, kind: str, concurrency: int, processes: int = 1) -> Run:
    """emqd-worker with the no-op handler of `kind` ("async" or "sync") over the
    benchmark's queue, given `url` (also the cluster scenario's, emqd/bench/cluster.py)."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(EMQD_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "emqd.client", f"emqd.bench.handlers:noop_{kind}",
            "--queue", scenarios.QUEUE.decode(), "--url", url, "--concurrency",
            str(concurrency), "--progress-interval", "0", "--loglevel", "warning"]
    if processes > 1:
        argv += ["--processes", str(processes)]
    return Run(key, argv, env, all_cpus=processes > 1)


def bullmq_dir(given: str | None) -> Path | None:
    """The directory holding node_modules/bullmq: `--bullmq-dir`, else $EMQD_BENCH_BULLMQ."""
    chosen = given or os.environ.get(BULLMQ_ENV)
    if not chosen:
        return None
    path = Path(chosen)
    return path if (path / "node_modules" / "bullmq").is_dir() else None


def bullmq_missing(given: str | None) -> str | None:
    """Why BullMQ cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if bullmq_dir(given) is None:
        return (f"no node_modules/bullmq in --bullmq-dir or ${BULLMQ_ENV} "
                "(npm install bullmq in a directory of your choice)")
    return None


def dramatiq_missing() -> str | None:
    if importlib.util.find_spec("dramatiq") is None:
        return "the dramatiq package is not installed (pip install 'dramatiq[redis]')"
    return None


def bullmq_runs(port: int, directory: Path, concurrencies: tuple[int, ...]) -> list[Run]:
    script = str(NODE_DIR / "bullmq_worker.cjs")
    return [Run(f"bullmq.{c}", ["node", script, str(directory), str(port), "work", str(c)], {})
            for c in concurrencies]


def dramatiq_runs(port: int, concurrencies: tuple[int, ...]) -> list[Run]:
    """Dramatiq at the issue's `--threads 50` only (at 10 and 500 threads it drained
    2,700 and 1,000 jobs a second, which made the scenario a minute longer a repeat)."""
    at = PROCESSES_AT if PROCESSES_AT in concurrencies else concurrencies[0]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(EMQD_ROOT),
                                                       os.environ.get("PYTHONPATH")])),
           "EMQD_BENCH_DRAMATIQ_URL": f"redis://127.0.0.1:{port}/0"}
    return [Run(f"dramatiq.{c}", [sys.executable, "-m", "dramatiq", "emqd.bench.dramatiq_tasks",
                                  "--processes", "1", "--threads", str(c)], env)
            for c in (at,)]


async def count(port: int, *argv: bytes | str | int) -> int:
    """An integer reply (or a nil, as 0)."""
    reply = await _call(port, *argv)
    return int(reply) if isinstance(reply, (int, bytes)) else 0


async def _call(port: int, *argv: bytes | str | int) -> object:
    client = await Client.connect(port)
    try:
        reply = (await client.pipeline([encode(*argv)]))[0]
    finally:
        client.close()
    if isinstance(reply, ReplyError):
        raise scenarios.BenchError(f"{argv[0]!r} answered {reply}")
    return reply


async def drain(run: Run, finished: Callable[[], Awaitable[int]], total: int,
                client_cpus: set[int] | None, server: Server) -> Drain:
    """Start the run's worker, watch it drain `total` jobs, stop it (SIGTERM, then
    SIGKILL) whatever happens; a failed run says what the worker printed last."""
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(run.argv, env={**os.environ, **run.env}, cwd=EMQD_ROOT,
                                stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            if client_cpus:
                os.sched_setaffinity(proc.pid, set(range(os.cpu_count() or 1))
                                     if run.all_cpus else client_cpus)
            return await watch(proc, finished, total, STALL_S, server.pid)
        except DrainError as error:
            _stop(proc)
            output.seek(0)
            said = output.read().decode(errors="replace")[-2000:]
            raise DrainError(f"{run.key}: {error}; it printed:\n{said}") from None
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_S)


# --- emqd ------------------------------------------------------------------------------
async def emqd_run(target: Target, run: Run, total: int,
                   client_cpus: set[int] | None) -> Drain:
    await _call(target.port, b"FLUSHALL")
    await scenarios.fill(target, total)
    counter = queue_keys(scenarios.QUEUE).metrics_completed

    async def completed() -> int:
        return await count(target.port, b"HGET", counter, b"count")

    return await drain(run, completed, total, client_cpus, target.server)


# --- BullMQ ----------------------------------------------------------------------------
async def bullmq_run(server: Server, run: Run, directory: Path, total: int,
                     client_cpus: set[int] | None) -> Drain:
    await _call(server.port, b"FLUSHALL")
    script = str(NODE_DIR / "bullmq_worker.cjs")
    filled = await asyncio.create_subprocess_exec(
        "node", script, str(directory), str(server.port), "fill", str(total),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await filled.communicate()
    if filled.returncode != 0:
        raise scenarios.BenchError(f"bullmq fill failed: {err.decode(errors='replace')}")

    async def completed() -> int:
        return await count(server.port, b"ZCARD", b"bull:bench:completed")

    return await drain(run, completed, total, client_cpus, server)


# --- Dramatiq --------------------------------------------------------------------------
async def dramatiq_run(server: Server, run: Run, total: int,
                       client_cpus: set[int] | None) -> Drain:
    await _call(server.port, b"FLUSHALL")
    filled = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emqd.bench.dramatiq_tasks", str(total),
        env={**os.environ, **run.env}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await filled.communicate()
    if filled.returncode != 0:
        raise scenarios.BenchError(f"dramatiq fill failed: {err.decode(errors='replace')}")

    async def completed() -> int:
        return total - await count(server.port, b"HLEN", b"dramatiq:default.msgs")

    return await drain(run, completed, total, client_cpus, server)
