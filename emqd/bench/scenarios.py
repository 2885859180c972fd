"""The scenarios: each runs the same client code against one `Target`.

A scenario is an async function `(target, sizes) -> {figure: value}`. It
never times its own setup (filling a queue, claiming leases to expire), and
it checks every reply, so a server that answers errors fails the run instead
of looking fast. `VERBS` says which EMQ verbs each scenario needs, so a
scenario whose verbs an emqd does not have yet is reported as n/a.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Final

from emqd.bench.client import Client, ReplyError, encode
from emqd.bench.targets import Target
from emqd.layout import queue_keys

QUEUE = b"bench"
PAYLOAD = b"p" * 100  # the payload size, for every scenario
LEASE_MS = 30_000
SETUP_PIPELINE = 1000  # requests per pipeline when filling a queue (untimed)


@dataclass(frozen=True)
class Sizes:
    jobs: int = 20_000  # cycle: jobs added, claimed and completed
    conns: int = 4  # cycle and fail: producer connections, and as many consumers
    pipeline: int = 50  # cycle and fail: commands per pipeline
    latency_cycles: int = 2_000
    fail_jobs: int = 5_000  # each fails max_attempts (3) times
    sweep_jobs: int = 20_000
    memory_jobs: int = 100_000
    memory_sets: int = 10_000  # memory: sorted sets of each size in SET_SIZES, for RSS
    ping_requests: int = 200_000
    load_jobs: int = 100_000  # the figure is 1,000,000 (--big)
    durable_jobs: int = 5_000
    scan_sizes: tuple[int, ...] = (10_000, 100_000)  # scan: collections paged COUNT 10
    big_value_mib: int = 64  # bigvalue: the one HSET's value (the issue's: 200 MiB, --big)
    takeover_jobs: int = 100_000  # cluster: jobs in the queue a front takes over
    scale_queues: int = 10_000  # cluster-scale: queues of one job each
    worker_jobs: int = 50_000  # worker: jobs preloaded for each worker to drain
    worker_concurrencies: tuple[int, ...] = (10, 50, 500)  # worker: slots of each run


class BenchError(RuntimeError):
    """A reply that a correct server would not give: the run is void."""


VERBS: dict[str, tuple[str, ...]] = {
    "cycle": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.COMPLETE"),
    "latency": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.COMPLETE"),
    "fail": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.FAIL", "EMQ.PROMOTE"),
    "sweep": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.STALLED.CHECK"),
    "memory": ("EMQ.ADD",),
    "ping": (),
    "load": ("EMQ.ADD",),
    "durable": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.COMPLETE"),
    "scan": (),
    "bigvalue": (),
    "cluster": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.COMPLETE"),
    "cluster-scale": ("EMQ.ADD", "EMQ.CLAIM"),
    "worker": ("EMQ.ADD", "EMQ.CLAIM", "EMQ.COMPLETE", "EMQ.EXTEND"),
}


def _check(reply: object, what: str) -> None:
    if isinstance(reply, ReplyError):
        raise BenchError(f"{what} answered an error: {reply}")


def _claimed(reply: object) -> tuple[bytes, bytes]:
    """(id, token) from a CLAIM reply; a nil here means a job was lost."""
    _check(reply, "CLAIM")
    if not isinstance(reply, list) or len(reply) != 4:
        raise BenchError(f"CLAIM answered {reply!r} for a job that was added")
    return reply[0], reply[1]


async def fill(target: Target, count: int, conns: int = 4, depth: int = 0) -> None:
    """Add `count` jobs over `conns` connections in pipelines of `depth` (big ones, for
    a setup, by default)."""
    request = target.add(QUEUE, PAYLOAD)
    depth = depth or SETUP_PIPELINE

    async def one(share: int) -> None:
        client = await Client.connect(target.port)
        try:
            while share > 0:
                n = min(share, depth)
                for reply in await client.pipeline([request] * n):
                    _check(reply, "ADD")
                share -= n
        finally:
            client.close()

    shares = [count // conns + (1 if i < count % conns else 0) for i in range(conns)]
    await asyncio.gather(*(one(s) for s in shares if s))


async def pending_count(target: Target) -> int:
    """How many jobs wait in the benchmark's queue (ZCARD of its pending set)."""
    client = await Client.connect(target.port)
    try:
        count = await client.call(b"ZCARD", queue_keys(QUEUE).pending)
    finally:
        client.close()
    _check(count, "ZCARD")
    return int(count)


class Stock:
    """Jobs whose ADD was acknowledged and that no consumer has reserved yet.

    A consumer reserves before it claims, so every CLAIM it sends finds a job
    (a nil would be a lost job) and no CLAIM is wasted on an empty queue.
    """

    def __init__(self, total: int) -> None:
        self.available = 0
        self.unreserved = total  # jobs not yet reserved, added or not
        self.changed = asyncio.Event()

    def put(self, n: int) -> None:
        self.available += n
        self.changed.set()

    async def take(self, most: int, wait: bool) -> int:
        while self.available == 0 and wait and self.unreserved > 0:
            self.changed.clear()
            await self.changed.wait()
        n = min(most, self.available)
        self.available -= n
        self.unreserved -= n
        return n


async def cycle(target: Target, sizes: Sizes) -> dict[str, float]:
    """ADD -> CLAIM -> COMPLETE for `jobs` jobs, producers and consumers at once."""
    total, conns, depth = sizes.jobs, sizes.conns, sizes.pipeline
    add = target.add(QUEUE, PAYLOAD)
    claim = target.claim(QUEUE, LEASE_MS)
    stock = Stock(total)
    producers = [await Client.connect(target.port) for _ in range(conns)]
    consumers = [await Client.connect(target.port) for _ in range(conns)]

    async def produce(client: Client, share: int) -> None:
        while share > 0:
            n = min(share, depth)
            for reply in await client.pipeline([add] * n):
                _check(reply, "ADD")
            share -= n
            stock.put(n)

    async def consume(client: Client) -> None:
        held: list[tuple[bytes, bytes]] = []
        while True:
            n = await stock.take(depth - len(held) if held else depth, wait=not held)
            if n == 0 and not held:
                return
            requests = [target.complete(QUEUE, job, token) for job, token in held]
            requests += [claim] * n
            replies = await client.pipeline(requests)
            for reply in replies[: len(held)]:
                if reply != b"OK":
                    raise BenchError(f"COMPLETE answered {reply!r}")
            held = [_claimed(reply) for reply in replies[len(held) :]]

    shares = [total // conns + (1 if i < total % conns else 0) for i in range(conns)]
    try:
        cpu = target.server.cpu_seconds()
        started = time.perf_counter()
        await asyncio.gather(*(produce(c, s) for c, s in zip(producers, shares, strict=True)),
                             *(consume(c) for c in consumers))
        elapsed = time.perf_counter() - started
        cpu = target.server.cpu_seconds() - cpu
    finally:
        for client in producers + consumers:
            client.close()
    figures = {"cycle": total / elapsed}
    # Per second of the server's own CPU time too: on a shared machine the
    # wall-clock rate moves with whatever else runs, the CPU rate much less.
    # /proc counts in clock ticks (10 ms): too coarse for a tiny run.
    if cpu >= 0.05:
        figures["cycle.cpu"] = total / cpu
    return figures


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def latency(target: Target, sizes: Sizes) -> dict[str, float]:
    """One connection, no pipeline: the round trip of each verb, in microseconds."""
    client = await Client.connect(target.port)
    add, claim = target.add(QUEUE, PAYLOAD), target.claim(QUEUE, LEASE_MS)
    times: dict[str, list[float]] = {"add": [], "claim": [], "complete": []}
    warmup = max(10, sizes.latency_cycles // 10)
    clock = time.perf_counter_ns
    try:
        for i in range(warmup + sizes.latency_cycles):
            t0 = clock()
            _check((await client.pipeline([add]))[0], "ADD")
            t1 = clock()
            job, token = _claimed((await client.pipeline([claim]))[0])
            t2 = clock()
            done = (await client.pipeline([target.complete(QUEUE, job, token)]))[0]
            t3 = clock()
            if done != b"OK":
                raise BenchError(f"COMPLETE answered {done!r}")
            if i >= warmup:
                times["add"].append((t1 - t0) / 1000)
                times["claim"].append((t2 - t1) / 1000)
                times["complete"].append((t3 - t2) / 1000)
    finally:
        client.close()
    figures = {}
    for verb, samples in times.items():
        figures[f"{verb}.p50"] = percentile(samples, 0.50)
        figures[f"{verb}.p99"] = percentile(samples, 0.99)
    return figures


async def fail(target: Target, sizes: Sizes) -> dict[str, float]:
    """CLAIM + FAIL (BACKOFF 0) until every job is dead: FAILs per second.

    Each pipeline carries the FAILs of the jobs claimed by the last one, one
    PROMOTE (retries wait in `scheduled` even at backoff 0) and new CLAIMs.
    """
    total = sizes.fail_jobs
    await fill(target, total)
    claim = target.claim(QUEUE, LEASE_MS)
    promote = target.promote(QUEUE, 1000)
    clients = [await Client.connect(target.port) for _ in range(sizes.conns)]
    counts = {"dead": 0, "fails": 0}

    async def worker(client: Client) -> None:
        held: list[tuple[bytes, bytes]] = []
        while counts["dead"] < total:
            requests = [target.fail(QUEUE, job, token, 0) for job, token in held]
            requests += [promote] + [claim] * sizes.pipeline
            replies = await client.pipeline(requests)
            for reply in replies[: len(held)]:
                _check(reply, "FAIL")
                counts["fails"] += 1
                if reply[0] == b"dead":
                    counts["dead"] += 1
            _check(replies[len(held)], "PROMOTE")
            held = [_claimed(r) for r in replies[len(held) + 1 :] if r is not None]
            if not held and counts["dead"] < total:
                await asyncio.sleep(0.001)  # the others hold the rest; let them fail it

    try:
        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - started
    finally:
        for client in clients:
            client.close()
    return {"fail": counts["fails"] / elapsed}


async def sweep(target: Target, sizes: Sizes) -> dict[str, float]:
    """`sweep_jobs` expired leases recovered by STALLED.CHECK LIMIT 100: leases per second."""
    total = sizes.sweep_jobs
    await fill(target, total)
    client = await Client.connect(target.port)
    try:
        claim = target.claim(QUEUE, 1)
        left = total
        while left:
            n = min(left, SETUP_PIPELINE)
            for reply in await client.pipeline([claim] * n):
                _claimed(reply)
            left -= n
        await asyncio.sleep(0.01)  # every 1 ms lease has run out
        check = target.stalled_check(QUEUE, 100)
        recovered = 0
        started = time.perf_counter()
        while recovered < total:
            reply = (await client.pipeline([check]))[0]
            _check(reply, "STALLED.CHECK")
            if not reply[0] and not reply[1]:
                raise BenchError(f"STALLED.CHECK found nothing with {total - recovered} left")
            recovered += len(reply[0]) + len(reply[1])
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    return {"sweep": total / elapsed}


SET_SIZES: Final = (1, 4, 16, 128)  # members of the small sorted sets measured (issue 26)


async def memory(target: Target, sizes: Sizes) -> dict[str, float]:
    """Resident memory per pending job: RSS after `memory_jobs` ADDs, less RSS before;
    then small sorted sets (11-byte members) of each size in SET_SIZES: MEMORY USAGE of
    one, and RSS per set over `memory_sets` of them (plain ZADDs, the same on both).

    Run on a freshly started server, so the figures hold no earlier run's heap (the sets
    come after the jobs, and nothing is freed between, so no figure reuses freed room).
    """
    before = target.server.rss_bytes()
    await fill(target, sizes.memory_jobs)
    await asyncio.sleep(0.1)
    figures = {"memory": (target.server.rss_bytes() - before) / sizes.memory_jobs}
    client = await Client.connect(target.port)
    try:
        for members in SET_SIZES:
            pairs: list[bytes | int] = []
            for i in range(members):
                pairs += [i, b"member%05d" % i]
            before = target.server.rss_bytes()
            for start in range(0, sizes.memory_sets, SETUP_PIPELINE):
                stop = min(start + SETUP_PIPELINE, sizes.memory_sets)
                replies = await client.pipeline(
                    [encode("ZADD", b"set%d:%07d" % (members, n), *pairs)
                     for n in range(start, stop)])
                _check(replies[-1], "ZADD")
            await asyncio.sleep(0.1)
            figures[f"zset{members}.rss"] = \
                (target.server.rss_bytes() - before) / sizes.memory_sets
            usage = (await client.pipeline(
                [encode("MEMORY", "USAGE", b"set%d:0000000" % members)]))[0]
            _check(usage, "MEMORY USAGE")
            figures[f"zset{members}.usage"] = float(usage)
    finally:
        client.close()
    return figures


async def ping(target: Target, sizes: Sizes, client_cpus: set[int] | None) -> dict[str, float]:
    """redis-benchmark -P 16 -t ping against the target: requests per second."""
    argv = ["redis-benchmark", "-p", str(target.port), "-P", "16", "-t", "ping",
            "-n", str(sizes.ping_requests), "--csv"]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    if client_cpus:
        import os
        os.sched_setaffinity(proc.pid, client_cpus)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise BenchError(f"redis-benchmark failed: {err.decode(errors='replace')}")
    figures = {}
    for line in out.decode().splitlines():
        cells = [cell.strip('"') for cell in line.split(",")]
        if cells[0] in ("PING_INLINE", "PING_MBULK"):
            figures[cells[0].lower()] = float(cells[1])
    if len(figures) != 2:
        raise BenchError(f"unexpected redis-benchmark output: {out!r}")
    return figures


# --- scan: HSCAN/ZSCAN per-call cost, by size ---------------------------------------
SCAN_CALLS = 2_000  # calls timed per collection, in pipelines of SCAN_PIPELINE
SCAN_PIPELINE = 100
FILL_ITEMS = 1_000  # fields or members per HSET / ZADD when filling (untimed)


async def scan(target: Target, sizes: Sizes) -> dict[str, float]:
    """HSCAN and ZSCAN COUNT 10 of a hash and a sorted set of each of `scan_sizes`: the
    server's microseconds per call, which must not grow with the size (issue 15).

    Calls go in pipelines at cursors spread over the first 90% of the cursor space
    (any number is a cursor; a page from there never reaches the end), so the figure
    is the server's time a call, not the round trip's. Before timing, a scan is run
    until its first page: emqd builds a collection's index in the first calls.
    """
    client = await Client.connect(target.port)
    figures: dict[str, float] = {}
    try:
        for size in sizes.scan_sizes:
            hash_key, zset_key = b"bench:h:%d" % size, b"bench:z:%d" % size
            await _fill_collections(client, hash_key, zset_key, size)
            for command, key in ((b"HSCAN", hash_key), (b"ZSCAN", zset_key)):
                await _first_page(client, command, key)
                step = (2**63 * 9 // 10) // SCAN_CALLS
                requests = [encode(command, key, 1 + i * step, b"COUNT", 10)
                            for i in range(SCAN_CALLS)]
                started = time.perf_counter()
                for at in range(0, SCAN_CALLS, SCAN_PIPELINE):
                    for reply in await client.pipeline(requests[at:at + SCAN_PIPELINE]):
                        _check(reply, command.decode())
                elapsed = time.perf_counter() - started
                figures[f"{command.decode().lower()}.{size}"] = elapsed / SCAN_CALLS * 1e6
    finally:
        client.close()
    return figures


async def _fill_collections(client: Client, hash_key: bytes, zset_key: bytes, size: int) -> None:
    requests = []
    for start in range(0, size, FILL_ITEMS):
        numbers = range(start, min(size, start + FILL_ITEMS))
        requests.append(encode(b"HSET", hash_key, *(x for i in numbers
                                                     for x in (b"f%d" % i, b"v%d" % i))))
        requests.append(encode(b"ZADD", zset_key, *(x for i in numbers
                                                     for x in (b"%d" % i, b"m%d" % i))))
    for at in range(0, len(requests), 50):
        for reply in await client.pipeline(requests[at:at + 50]):
            _check(reply, "fill")


async def _first_page(client: Client, command: bytes, key: bytes) -> None:
    cursor: bytes = b"0"
    for _ in range(100_000):
        reply = await client.call(command, key, cursor, b"COUNT", 10)
        _check(reply, command.decode())
        cursor, items = reply
        if items or cursor == b"0":
            return
    raise BenchError(f"{command.decode()} answered no member in 100,000 calls")


# --- bigvalue: the memory one big value costs -------------------------------------
async def bigvalue(target: Target, sizes: Sizes) -> dict[str, float]:
    """One HSET of a `big_value_mib` MiB value on a fresh server with its log on: the
    server's peak resident memory over its size before, in multiples of the value
    (issue 15: under about 2; it was 4). Also what stays once it is stored."""
    value = bytes(sizes.big_value_mib << 20)
    client = await Client.connect(target.port)
    try:
        await asyncio.sleep(0.1)
        before = target.server.rss_bytes()
        reply = await client.call(b"HSET", b"bench:big", b"f", value)
        _check(reply, "HSET")
        await asyncio.sleep(0.1)
        peak = target.server.peak_rss_bytes()
        after = target.server.rss_bytes()
    finally:
        client.close()
    return {"bigvalue.peak": (peak - before) / len(value),
            "bigvalue.after": (after - before) / len(value)}
