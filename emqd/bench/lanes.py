"""The lanes benchmark: CLAIM throughput with 10,000 lanes against the flat queue.

    python3 -m emqd.bench.lanes [--lanes 10000] [--jobs 40000] [--lane-limit 1] [--conns 4]
                           [--pipeline 50] [--repeat 3] [--no-pin]

One emqd (`--appendonly no`, as emqd-bench starts it) is started on a free
loopback port and stopped by PID at the end. Each repeat runs both cases on a
flushed keyspace, alternating which goes first:

- flat: `jobs` jobs added without GROUP;
- lanes: the same number of jobs spread over `lanes` groups (job i in group
  i % lanes). At the default lane_limit of 1 every CLAIM takes a lane out of
  the ring (it is full) and every COMPLETE puts it back at the end; with
  `--lane-limit 0` (no limit) a CLAIM moves the lane to the back instead and
  a COMPLETE leaves the ring alone.

Filling is not timed. Then `conns` connections each send pipelines of the
COMPLETEs of the jobs they claimed last time plus `pipeline` CLAIMs, until
every job is claimed; a nil CLAIM while jobs remain voids the run. Two
figures: CLAIMs per second of wall time, and CLAIMs per second of the
server's CPU time (utime + stime from /proc, so that other processes on a
busy machine do not move it: the server is CPU-bound, and this is the rate
it sustains per core). Printed are the medians and the ratios lanes / flat
(the issue's target: at least 0.8). Reuses emqd-bench's client and server
helpers (emqd/bench), so both measure the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import uvloop

from emqd.bench.client import Client, ReplyError, encode
from emqd.bench.servers import new_workdir, start_emqd

QUEUE = b"bench"
PAYLOAD = b"p" * 100
LEASE_MS = 60_000
FILL_PIPELINE = 1000


class BenchError(RuntimeError):
    """A reply a correct server would not give: the run is void."""


def _check(reply: object, what: str) -> None:
    if isinstance(reply, ReplyError):
        raise BenchError(f"{what} answered an error: {reply}")


async def fill(port: int, jobs: int, lanes: int | None, lane_limit: int) -> None:
    """Add `jobs` jobs, flat or over `lanes` groups (untimed)."""
    client = await Client.connect(port)
    try:
        _check(await client.call(b"FLUSHALL"), "FLUSHALL")
        _check(await client.call(b"EMQ.CONFIG", QUEUE, b"SET", b"lane_limit", lane_limit),
               "CONFIG")
        for start in range(0, jobs, FILL_PIPELINE):
            batch = range(start, min(start + FILL_PIPELINE, jobs))
            if lanes is None:
                requests = [encode(b"EMQ.ADD", QUEUE, PAYLOAD) for _ in batch]
            else:
                requests = [encode(b"EMQ.ADD", QUEUE, PAYLOAD, b"GROUP", b"g%d" % (i % lanes))
                            for i in batch]
            for reply in await client.pipeline(requests):
                _check(reply, "ADD")
    finally:
        client.close()


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def claims_per_second(port: int, pid: int, jobs: int, conns: int,
                            depth: int) -> tuple[float, float]:
    """CLAIM (and COMPLETE what was claimed) until `jobs` are claimed: CLAIMs per second
    of wall time, and per second of the server's CPU time."""
    claim = encode(b"EMQ.CLAIM", QUEUE, LEASE_MS)
    clients = [await Client.connect(port) for _ in range(conns)]
    left = [jobs]

    async def worker(client: Client) -> None:
        held: list[tuple[bytes, bytes]] = []
        while left[0] > 0 or held:
            n = min(depth, left[0])
            left[0] -= n
            requests = [encode(b"EMQ.COMPLETE", QUEUE, j, t) for j, t in held] + [claim] * n
            replies = await client.pipeline(requests)
            for reply in replies[: len(held)]:
                if reply != b"OK":
                    raise BenchError(f"COMPLETE answered {reply!r}")
            held = []
            for reply in replies[len(replies) - n:]:
                _check(reply, "CLAIM")
                if not isinstance(reply, list):
                    raise BenchError(f"CLAIM answered {reply!r} with jobs left")
                held.append((reply[0], reply[1]))

    try:
        started, cpu = time.perf_counter(), cpu_seconds(pid)
        await asyncio.gather(*(worker(c) for c in clients))
        # /proc counts CPU in clock ticks: a run shorter than one tick reads as 0,
        # so count it as one tick rather than divide by zero.
        used = max(cpu_seconds(pid) - cpu, 1 / os.sysconf("SC_CLK_TCK"))
        return (jobs / (time.perf_counter() - started), jobs / used)
    finally:
        for client in clients:
            client.close()


Rates = tuple[float, float]  # (jobs/s wall, jobs per CPU second), as _case returns them


async def run(args: argparse.Namespace, port: int, pid: int) -> dict[str, list[Rates]]:
    results: dict[str, list[Rates]] = {"flat": [], "lanes": []}
    for repeat in range(args.repeat):
        order = ("flat", "lanes") if repeat % 2 == 0 else ("lanes", "flat")
        for case in order:
            await fill(port, args.jobs, None if case == "flat" else args.lanes, args.lane_limit)
            wall, cpu = await claims_per_second(port, pid, args.jobs, args.conns, args.pipeline)
            results[case].append((wall, cpu))
            print(f"  {case:5} run {repeat + 1}: {wall:,.0f} claims/s, {cpu:,.0f} per CPU s",
                  file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lanes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--lane-limit", type=int, default=1, help="the queue's lane_limit")
    parser.add_argument("--conns", type=int, default=4)
    parser.add_argument("--pipeline", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and client")
    args = parser.parse_args(argv)
    if args.lanes < args.conns * args.pipeline:
        parser.error("--lanes must be at least --conns x --pipeline (every CLAIM finds a lane)")
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    workdir = new_workdir()
    server = start_emqd(workdir, {0} if pin else None)
    try:
        if pin:
            os.sched_setaffinity(0, {1})
        results = uvloop.run(run(args, server.port, server.pid))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"lanes benchmark: {args.jobs:,} jobs, {args.lanes:,} lanes "
          f"(lane_limit {args.lane_limit}), "
          f"{args.conns} connections x {args.pipeline} per pipeline, median of {args.repeat}"
          f"{', pinned' if pin else ''}")
    print(f"{'':6}{'claims/s':>14}{'claims/CPU s':>14}")
    medians = {}
    for case in ("flat", "lanes"):
        medians[case] = [statistics.median(r[i] for r in results[case]) for i in (0, 1)]
        print(f"{case:6}{medians[case][0]:14,.0f}{medians[case][1]:14,.0f}")
    ratios = [medians["lanes"][i] / medians["flat"][i] for i in (0, 1)]
    print(f"{'ratio':6}{ratios[0]:14.2f}{ratios[1]:14.2f}   (lanes / flat; target >= 0.80)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
