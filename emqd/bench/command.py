"""The `emqd-bench` command: start the servers, run the scenarios, print the table.

Servers are started here, on free loopback ports in a temporary directory,
with their default settings (emqd with `--appendonly no`, as the
redis-server beside it has no log), and stopped by PID in `finally` (also on
Ctrl-C, SIGTERM and errors). Each scenario runs `--repeat` times per server,
alternating which server goes first, and the table shows medians. With two
or more cores the servers are pinned to CPU 0 and this process (and
redis-benchmark) to CPU 1, as the issue's reference measurement was taken;
`--no-pin` turns that off.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

from emqd import core_build
from emqd.bench import cluster as bench_cluster
from emqd.bench import profile, report, scenarios, worker_report, workers
from emqd.bench.client import Client
from emqd.bench.drain import Drain
from emqd.bench.scenarios import VERBS, Sizes
from emqd.bench.servers import Server, new_workdir, redis_server_path, start_emqd, start_redis
from emqd.bench.targets import EmqdTarget, LuaTarget, Target

ALL = ("cycle", "latency", "fail", "sweep", "memory", "ping", "load", "durable", "scan",
       "bigvalue", "cluster", "cluster-scale", "worker")
# What runs unless --scenarios says otherwise: the cluster ones start clusters (minutes),
# and worker measures emqd-worker (and BullMQ's and Dramatiq's), not the server (minutes).
DEFAULT = tuple(name for name in ALL if not name.startswith("cluster") and name != "worker")
# Scenarios run on servers started for them alone, with these extra flags:
# memory and bigvalue must not see an earlier run's heap (bigvalue with the log
# on, on both: the record is part of what a value costs); sweep drives
# recovery itself (STALLED.CHECK, as on Redis), so emqd's own stall sweep is
# off there.
FRESH: dict[str, dict[str, tuple[str, ...]]] = {
    "memory": {},
    "sweep": {"emqd": ("--stalled-interval", "0")},
    "bigvalue": {"emqd": ("--appendonly", "yes"), "redis": ("--appendonly", "yes")},
}
BIG = Sizes(jobs=200_000, latency_cycles=10_000, fail_jobs=20_000, sweep_jobs=100_000,
            memory_jobs=1_000_000, ping_requests=1_000_000, load_jobs=1_000_000,
            durable_jobs=50_000, scan_sizes=(100_000, 1_000_000), big_value_mib=200,
            worker_jobs=200_000, takeover_jobs=1_000_000)
# Scenarios that start and stop their own servers (Bench.load, Bench.durable).
LIFECYCLE = ("load", "durable", "cluster", "cluster-scale", "worker")
FSYNC_MODES = ("no", "everysec", "always")  # "no": no log at all
Measuring = Callable[[], Awaitable[Drain]]  # one run of the worker scenario


def build_parser() -> argparse.ArgumentParser:
    small = Sizes()
    parser = argparse.ArgumentParser(
        prog="emqd-bench",
        description="Run the same job cycle against emqd and redis-server + Lua; print "
        "both figures and the ratio emqd / redis. See docs/PERFORMANCE.md.",
    )
    parser.add_argument("--scenarios", default=",".join(DEFAULT),
                        help=f"comma-separated, from {','.join(ALL)} (default: all but cluster)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per figure; the median is shown")
    parser.add_argument("--big", action="store_true",
                        help="the issue's sizes: 200k cycle jobs, 100k sweep leases, 1M memory "
                        "jobs, 1M pings, a 1M-job takeover (flags below still win)")
    for name, help_text in (
        ("jobs", "cycle: jobs"),
        ("conns", "cycle, fail: producer connections, and as many consumers"),
        ("pipeline", "cycle, fail: commands per pipeline"),
        ("latency_cycles", "latency: measured cycles"),
        ("fail_jobs", "fail: jobs, each failed until dead"),
        ("sweep_jobs", "sweep: expired leases to recover"),
        ("memory_jobs", "memory: jobs added"),
        ("memory_sets", "memory: small sorted sets of each size (1, 4, 16, 128 members)"),
        ("ping_requests", "ping: requests per redis-benchmark run"),
        ("load_jobs", "load: jobs in the append-only file"),
        ("durable_jobs", "durable: cycle jobs per fsync policy"),
        ("big_value_mib", "bigvalue: MiB of the one value"),
        ("takeover_jobs", "cluster: jobs in the queue a front takes over"),
        ("scale_queues", "cluster-scale: queues of one job each"),
        ("worker_jobs", "worker, cluster: jobs each worker drains"),
    ):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                            help=f"{help_text} (default {getattr(small, name):,})")
    parser.add_argument("--scan-sizes", type=_sizes, default=None,
                        help="scan: comma-separated collection sizes (default "
                        f"{','.join(map(str, small.scan_sizes))})")
    parser.add_argument("--cluster", metavar="HOST:PORT,...",
                        help="cluster: run over this existing cluster (its seed nodes) rather "
                        "than one of the benchmark's own; its nodes' CPU is not counted, and "
                        "the benchmark's queue is deleted at the end")
    parser.add_argument("--cluster-ports", type=_sizes, default=None, metavar="PORT,...",
                        help="cluster, cluster-scale: the ports of the benchmark's own "
                        "cluster's nodes (3, or 6 with replicas; each port + 10000 is its bus)")
    parser.add_argument("--worker-concurrencies", type=_sizes, default=None,
                        help="worker: comma-separated concurrencies (default "
                        f"{','.join(map(str, small.worker_concurrencies))}); --processes 2 "
                        "runs at 50, or at the first when 50 is not among them")
    parser.add_argument("--bullmq-dir", default=None,
                        help="worker: a directory whose node_modules holds bullmq (default "
                        f"${workers.BULLMQ_ENV}); without it BullMQ is skipped")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--no-pin", action="store_true", help="do not pin servers and client")
    parser.add_argument("--no-redis", action="store_true", help="measure emqd alone")
    parser.add_argument("--appendonly", choices=["yes", "no"], default="no",
                        help="emqd's --appendonly (default no, like the redis-server started)")
    parser.add_argument("--appendfsync", choices=["always", "everysec", "no"], default=None)
    parser.add_argument("--profile", metavar="DIR",
                        help="record emqd with py-spy during each scenario into DIR/SCENARIO.txt "
                        "(collapsed stacks) and print where its time went; figures of a "
                        "profiled run are a little lower")
    return parser


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not sizes: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"not sizes: {text!r}")
    return sizes


def sizes_from(args: argparse.Namespace) -> Sizes:
    base = BIG if args.big else Sizes()
    chosen = {name: getattr(args, name) for name in base.__dataclass_fields__
              if getattr(args, name, None) is not None}
    return Sizes(**{**base.__dict__, **chosen})


class Bench:
    """One run: the servers it started, the results it gathered."""

    def __init__(self, args: argparse.Namespace, sizes: Sizes) -> None:
        self.args = args
        self.sizes = sizes
        self.workdir = new_workdir()
        self.live: list[Server] = []
        self.started: list[dict[Any, Any]] = []  # every server this run started, for the record
        self.results = report.Results()
        pin = not args.no_pin and (os.cpu_count() or 1) >= 2
        self.server_cpus = {0} if pin else None
        self.client_cpus = {1} if pin else None

    def start(self, name: str, *extra: str, workdir: Path | None = None) -> Target:
        """A server with `extra` flags; in `workdir` to restart on the same files."""
        if workdir is None:
            workdir = Path(self.workdir) / f"{name}-{len(self.started)}"
            workdir.mkdir()
        if name == "emqd":
            flags = ["--appendonly", self.args.appendonly]
            if self.args.appendfsync:
                flags += ["--appendfsync", self.args.appendfsync]
            flags += extra
            server = start_emqd(str(workdir), self.server_cpus, *flags)
            target: Target = EmqdTarget(server)
        else:
            server = start_redis(str(workdir), self.server_cpus, *extra)
            target = LuaTarget(server)
        self.live.append(server)
        self.started.append({"name": name, "pid": server.pid, "port": server.port})
        print(f"  started {name} pid {server.pid} port {server.port}", file=sys.stderr)
        return target

    def stop(self, target: Target) -> None:
        target.server.stop()
        self.live.remove(target.server)

    def stop_all(self) -> None:
        for server in self.live:
            server.stop()
        self.live.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    async def run(self, chosen: list[str]) -> None:
        names = ["emqd"]
        if redis_server_path() is None:
            print("redis-server is not on PATH: measuring emqd alone", file=sys.stderr)
        elif not self.args.no_redis:
            names.append("redis")
        shared = {name: self.start(name) for name in names}
        for scenario in chosen:
            for repeat in range(self.args.repeat):
                order = names if repeat % 2 == 0 else names[::-1]
                for name in order:
                    if (scenario, name) in self.results.skipped:
                        continue
                    if scenario in LIFECYCLE:
                        await getattr(self, scenario.replace("-", "_"))(name)
                        continue
                    fresh = scenario in FRESH
                    target = self.start(name, *FRESH[scenario].get(name, ())) if fresh \
                        else shared[name]
                    try:
                        await self.run_one(scenario, target)
                    finally:
                        if fresh:
                            self.stop(target)

    async def ready(self, scenario: str, target: Target) -> bool:
        """Flush, load scripts; False (and the reason noted) when the scenario cannot run."""
        client = await Client.connect(target.port)
        try:
            await client.call(b"FLUSHALL")
            await target.prepare(client)
            missing = await target.missing(client, VERBS[scenario])
        finally:
            client.close()
        if missing:
            self.results.skip(scenario, target.name, f"{', '.join(missing)} not on this emqd yet")
            return False
        if scenario == "ping" and shutil.which("redis-benchmark") is None:
            self.results.skip(scenario, target.name, "redis-benchmark is not on PATH")
            return False
        return True

    async def run_one(self, scenario: str, target: Target) -> None:
        if not await self.ready(scenario, target):
            return
        run: Callable[[], Awaitable[dict[str, float]]]
        if scenario == "ping":
            run = lambda: scenarios.ping(target, self.sizes, self.client_cpus)  # noqa: E731
        else:
            run = lambda: getattr(scenarios, scenario)(target, self.sizes)  # noqa: E731
        self.results.add(scenario, target.name, await self.measure(scenario, target, run))

    async def load(self, name: str) -> None:
        """Start-up time on an append-only file of `load_jobs` jobs, written by ADD."""
        logged = ("--appendonly", "yes")
        target = self.start(name, *logged)
        workdir = Path(target.server.workdir)
        try:
            if not await self.ready("load", target):
                return
            await scenarios.fill(target, self.sizes.load_jobs)
        finally:
            self.stop(target)  # SIGTERM: both servers flush their file and exit
        started = time.perf_counter()
        target = self.start(name, *logged, workdir=workdir)  # returns once it answers PING
        seconds = time.perf_counter() - started
        try:
            loaded = await scenarios.pending_count(target)
        finally:
            self.stop(target)
        if loaded != self.sizes.load_jobs:
            raise scenarios.BenchError(f"{name} loaded {loaded} of {self.sizes.load_jobs} jobs")
        self.results.add("load", name, {"load": seconds})
        print(f"  {'load':8} {name:6} {seconds:6.1f}s  start-up on {loaded:,} jobs",
              file=sys.stderr)

    async def durable(self, name: str) -> None:
        """The cycle under each fsync policy, on fresh servers, against no log at all."""
        sizes = dataclasses.replace(self.sizes, jobs=self.sizes.durable_jobs)
        rates: dict[str, float] = {}
        for mode in FSYNC_MODES:
            flags = ("--appendonly", "no") if mode == "no" else \
                ("--appendonly", "yes", "--appendfsync", mode)
            target = self.start(name, *flags)
            try:
                if not await self.ready("durable", target):
                    return
                figures = await self.measure(f"durable-{mode}", target,
                                             lambda: scenarios.cycle(target, sizes))  # noqa: B023
            finally:
                self.stop(target)
            rates[mode] = figures["cycle"]
        self.results.add("durable", name, {
            "always.cps": rates["always"], "everysec.cps": rates["everysec"],
            "always": rates["always"] / rates["no"], "everysec": rates["everysec"] / rates["no"],
        })

    async def cluster(self, name: str) -> None:
        """emqd fronts over a cluster started for them (emqd/bench/cluster.py), beside
        Redis + Lua on one node doing the same cycle."""
        if name == "emqd":
            if redis_server_path() is None:
                self.results.skip("cluster", name, "redis-server is not on PATH")
                return
            workdir = Path(self.workdir) / f"cluster-{len(self.started)}"
            front_cpus, node_cpus = self.server_cpus, self.client_cpus
            started = time.monotonic()
            figures = await bench_cluster.run(
                workdir, self.sizes, front_cpus, node_cpus, self.live, self.args.cluster,
                list(self.args.cluster_ports) if self.args.cluster_ports else None,
                self.client_cpus)
            print(f"  {'cluster':8} {name:6} {time.monotonic() - started:6.1f}s  "
                  + "  ".join(f"{k}={v:,.1f}" for k, v in figures.items()), file=sys.stderr)
            self.results.add("cluster", name, figures)
            return
        target = self.start(name)
        try:
            if not await self.ready("cycle", target):
                return
            cycle = await self.measure("cluster", target,
                                       lambda: scenarios.cycle(target, self.sizes))
            latency = await self.measure("cluster", target,
                                         lambda: scenarios.latency(target, self.sizes))
        finally:
            self.stop(target)
        figures = {"acks0.cycle": cycle["cycle"], "acks1.cycle": cycle["cycle"]}
        for prefix in ("owner", "other"):
            figures.update({f"{prefix}.{key}": value for key, value in latency.items()})
        self.results.add("cluster", name, figures)

    async def cluster_scale(self, name: str) -> None:
        """emqd's ownership with 10,000 queues over two fronts (emqd/bench/cluster.py);
        emqd alone: Redis + Lua has no fronts."""
        if name != "emqd":
            self.results.skip("cluster-scale", name, "fronts are emqd's")
            return
        if redis_server_path() is None or self.args.cluster:
            self.results.skip("cluster-scale", name, "needs a cluster of its own "
                              "(redis-server on PATH, no --cluster)")
            return
        workdir = Path(self.workdir) / f"cluster-scale-{len(self.started)}"
        started = time.monotonic()
        figures = await bench_cluster.scale(
            workdir, self.sizes, self.server_cpus, self.client_cpus, self.live,
            list(self.args.cluster_ports) if self.args.cluster_ports else None)
        print(f"  {'scale':8} {name:6} {time.monotonic() - started:6.1f}s  "
              + "  ".join(f"{k}={v:,.1f}" for k, v in figures.items()), file=sys.stderr)
        self.results.add("cluster-scale", name, figures)

    async def worker(self, name: str) -> None:
        """emqd-worker on an emqd of its own; BullMQ's and Dramatiq's workers on a
        redis-server of their own (emqd/bench/workers.py): each run's drain rate and
        worker CPU a job, under the keys of `workers.Run`."""
        target = self.start(name)
        try:
            if not await self.ready("worker", target):
                return
            for run, go in self.worker_runs(name, target):
                drained = await go()
                print(f"  {'worker':8} {run.key:18} {drained.rate:10,.0f} jobs/s  "
                      f"{drained.cpu_us:6.1f} us CPU a job, server {drained.server_cpu_us:.1f}",
                      file=sys.stderr)
                system = run.key.split(".", 1)[0]
                self.results.add("worker", system, {run.key: drained.rate,
                                                    run.key + ".cpu": drained.cpu_us,
                                                    run.key + ".server": drained.server_cpu_us})
        finally:
            self.stop(target)

    def worker_runs(self, name: str, target: Target) -> list[tuple[workers.Run, Measuring]]:
        """The runs of the `worker` scenario on this server, each with its measurement;
        a system that cannot run here is noted as skipped."""
        total, cpus = self.sizes.worker_jobs, self.client_cpus
        concurrencies = self.sizes.worker_concurrencies
        if name == "emqd":
            return [(run, functools.partial(workers.emqd_run, target, run, total, cpus))
                    for run in workers.emqd_runs(target.port, concurrencies)]
        chosen: list[tuple[workers.Run, Measuring]] = []
        missing = workers.bullmq_missing(self.args.bullmq_dir)
        directory = workers.bullmq_dir(self.args.bullmq_dir)
        if missing is not None or directory is None:
            self.results.skip("worker", "bullmq", missing or "no bullmq")
        else:
            chosen += [(run, functools.partial(workers.bullmq_run, target.server, run,
                                               directory, total, cpus))
                       for run in workers.bullmq_runs(target.port, directory, concurrencies)]
        missing = workers.dramatiq_missing()
        if missing is not None:
            self.results.skip("worker", "dramatiq", missing)
        else:
            chosen += [(run, functools.partial(workers.dramatiq_run, target.server, run,
                                               total, cpus))
                       for run in workers.dramatiq_runs(target.port, concurrencies)]
        return chosen

    async def measure(self, scenario: str, target: Target,
                      run: Callable[[], Awaitable[dict[str, float]]]) -> dict[str, float]:
        """Run one measurement, under py-spy with --profile; print its figures."""
        started = time.monotonic()
        recorder = None
        if self.args.profile and target.name == "emqd":
            part = Path(self.args.profile) / f"{scenario}.{len(self.started)}.part"
            recorder = profile.Recorder(target.server.pid, part)
            await asyncio.sleep(0.3)  # py-spy attaches
        try:
            figures = await run()
        finally:
            if recorder is not None:
                recorder.stop()
                self.merge_profile(scenario, recorder.out)
        print(f"  {scenario:8} {target.name:6} {time.monotonic() - started:6.1f}s  "
              + "  ".join(f"{k}={v:,.1f}" for k, v in figures.items()), file=sys.stderr)
        return figures


    def merge_profile(self, scenario: str, part: Path) -> None:
        if part.exists():
            with open(Path(self.args.profile) / f"{scenario}.txt", "a") as whole:
                whole.write(part.read_text())
            part.unlink()


def _shown(size: int | tuple[int, ...]) -> str:
    return f"{size:,}" if isinstance(size, int) else "/".join(f"{n:,}" for n in size)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in ALL]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = sizes_from(args)
    if args.profile:
        if not profile.available():
            parser.error("--profile needs py-spy on PATH (pip install py-spy)")
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        for old in Path(args.profile).glob("*.txt"):
            old.unlink()
    bench = Bench(args, sizes)
    if bench.client_cpus:
        os.sched_setaffinity(0, bench.client_cpus)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    started = time.time()
    try:
        uvloop.run(bench.run(chosen))
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        sys.exit(130)
    finally:
        bench.stop_all()
    rows = bench.results.rows(chosen, sizes, core_build())
    info = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": report.machine(),
        "pinned": "servers on CPU 0, client on CPU 1" if bench.server_cpus else "no",
        "emqd_core": core_build(),
        "repeat": args.repeat,
        "sizes": sizes.__dict__,
        "emqd_flags": {"appendonly": args.appendonly, "appendfsync": args.appendfsync},
        "servers": bench.started,
    }
    m = info["machine"]
    print(f"emqd-bench {info['when']}, {info['seconds']}s; {m['cpu']}, {m['cores']} cores, "
          f"Python {m['python']}, {m['redis']}; emqd core: {info['emqd_core']}")
    print(f"pinned: {info['pinned']}; median of {args.repeat}; sizes: "
          + ", ".join(f"{k}={_shown(v)}" for k, v in sizes.__dict__.items()))
    if rows:
        print(report.table(rows))
    worker_rows = worker_report.rows(bench.results) if "worker" in chosen else []
    if "worker" in chosen:
        print(f"\nworker: {sizes.worker_jobs:,} preloaded jobs drained, no-op handler")
        print(worker_report.table(worker_rows, bench.results.skipped))
    if args.profile:
        for scenario in sorted({path.stem for path in Path(args.profile).glob("*.txt")}):
            stacks = Path(args.profile) / f"{scenario}.txt"
            if stacks.exists():
                print(f"\nemqd during {scenario} (py-spy, {stacks}):")
                print(profile.summary(stacks))
    if args.json:
        report.write_json(args.json, rows, {**info, "worker_rows": worker_rows})
