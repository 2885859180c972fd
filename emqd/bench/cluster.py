"""The `cluster` and `cluster-scale` scenarios: emqd fronts over a Redis Cluster.

The benchmark starts a cluster of its own (3 primaries, redis-server in cluster
mode; on free ports, or on `--cluster-ports`), or uses the one `--cluster`
names (seed HOST:PORT list: then no node's CPU is counted, the scale scenario
is not run, and what the benchmark wrote, its queues `bench*`, is deleted at
the end). Over it, two fronts; the front a queue goes to (EMQ.OWNER) is "the
owner", the other "the other front".

`cluster` measures:

- the job cycle through the owner, on a cluster without replicas
  (`--cluster-acks 0`), and on one with a replica each and `--cluster-acks 1`;
- the server CPU each job costs, summed over every process (the front, and
  the cluster's nodes), and the front's and the nodes' shares;
- the latency of ADD, CLAIM and COMPLETE through the owner and through the
  other front (a forwarding hop);
- pipelined ADD through the owner and through the other front, and their ratio
  (forwarding is pipelined: issue 35 wants at least 0.5);
- emqd-worker (50 slots, the no-op async handler: the `worker` scenario's,
  emqd/bench/workers.py) draining `worker_jobs` preloaded jobs, given the owner's
  address and given the other front's, and their ratio (the client goes to the
  owner whichever front it is given: issue 35 wants at least 0.9);
- the time a takeover takes per 100,000 jobs: the owner stops cleanly (its
  lease is let go at once), and the other front answers the queue's next
  request once it loaded the queue.

`cluster-scale` (its own cluster with a replica each, default settings, two
fronts) measures 10,000 queues with one job each (`--scale-queues`): the time
to create them through both fronts (20 connections), the CPU of each front
and each primary over 30 s once they sat idle 40 s, and how long a CLAIM on
any of them takes then (the queue is taken on demand).

For redis it measures the same cycle and latency on one redis-server running
the Lua scripts (Redis + Lua doing the same work on one node), so the table
shows each figure beside the single node's. With two cores the fronts run on
CPU 0 and the cluster's nodes on CPU 1, as a front and a primary would on
different machines.
"""

from __future__ import annotations

import asyncio
import functools
import random
import socket
import subprocess
import time
from pathlib import Path

from emqd.bench import scenarios, workers
from emqd.bench.client import Client
from emqd.bench.scenarios import QUEUE, Sizes
from emqd.bench.servers import Server, redis_server_path, start_emqd
from emqd.bench.targets import EmqdTarget
from emqd.layout import queue_keys

# Node ports and their buses (+ 10000) below Linux's ephemeral range (32768 up): no
# client connection can hold one of them between the check and the node's bind.
PORT_LOW, PORT_HIGH = 12_000, 22_768


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(count: int) -> list[int]:
    """`count` free ports whose cluster-bus twins (+10000) are free too (also what the
    tests' clusters and fronts use)."""
    ports: list[int] = []
    for _ in range(10_000):
        port = random.randrange(PORT_LOW, PORT_HIGH)
        if port not in ports and _free(port) and _free(port + 10_000):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError("no free ports for a cluster")


class RedisCluster:
    """`primaries` redis-server nodes in cluster mode, `replicas` each, joined (on `ports`,
    or free ones); each node is also in `live` (the run's servers, stopped on an
    interrupt) while it runs."""

    def __init__(self, workdir: Path, primaries: int, replicas: int,
                 cpus: set[int] | None, live: list[Server], ports: list[int] | None = None,
                 ) -> None:
        self.nodes: list[Server] = []
        self.live = live
        count = primaries * (1 + replicas)
        try:
            if ports is not None and len(ports) < count:
                raise scenarios.BenchError(f"--cluster-ports: {count} ports needed")
            for port in (ports[:count] if ports else cluster_ports(count)):
                node_dir = workdir / f"node-{port}"
                node_dir.mkdir(parents=True)
                argv = [redis_server_path() or "redis-server", "--port", str(port), "--bind",
                        "127.0.0.1", "--cluster-enabled", "yes", "--cluster-node-timeout",
                        "2000", "--repl-diskless-sync-delay", "0",  # a replica syncs at once
                        "--save", "", "--appendonly", "no", "--dir", str(node_dir),
                        "--loglevel", "warning"]
                self.nodes.append(Server("redis", argv, port, str(node_dir), cpus=cpus))
                live.append(self.nodes[-1])
            subprocess.run(["redis-cli", "--cluster", "create",
                            *(f"127.0.0.1:{node.port}" for node in self.nodes),
                            "--cluster-replicas", str(replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
        except BaseException:
            self.stop()
            raise

    async def ready(self) -> None:
        deadline = time.monotonic() + 30
        for node in self.nodes:
            client = await Client.connect(node.port)
            try:
                while b"cluster_state:ok" not in await client.call(b"CLUSTER", b"INFO"):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not come up")
                    await asyncio.sleep(0.1)
                info = await client.call(b"INFO", b"replication")
                while b"role:slave" in info and b"master_link_status:up" not in info:
                    if time.monotonic() > deadline:
                        raise RuntimeError("a replica did not sync")
                    await asyncio.sleep(0.1)
                    info = await client.call(b"INFO", b"replication")
            finally:
                client.close()

    @property
    def seeds(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:3])

    def cpu_seconds(self) -> float:
        return sum(node.cpu_seconds() for node in self.nodes)

    def primaries(self) -> list[Server]:
        """The nodes that are primaries now."""
        found = []
        for node in self.nodes:
            info = subprocess.run(["redis-cli", "-p", str(node.port), "ROLE"],
                                  capture_output=True, text=True, timeout=10).stdout
            if info.startswith("master"):
                found.append(node)
        return found

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
            if node in self.live:
                self.live.remove(node)


class GivenCluster:
    """A cluster the benchmark did not start (`--cluster`): its nodes' CPU is not counted,
    and the benchmark's own keys are deleted at the end."""

    def __init__(self, seeds: str) -> None:
        self.seeds = seeds
        self.nodes: list[Server] = []

    async def ready(self) -> None:
        """Nothing of the benchmark's may be there already (its queue would be mixed in)."""
        host, _, port = self.seeds.split(",")[0].rpartition(":")
        client = await Client.connect(int(port), host)
        try:
            found = await client.call(b"CLUSTER", b"COUNTKEYSINSLOT", _slot(QUEUE))
        finally:
            client.close()
        if found:
            raise scenarios.BenchError(f"the cluster already holds keys of queue {QUEUE!r}")

    def cpu_seconds(self) -> float:
        return 0.0

    def stop(self) -> None:
        """Delete what the benchmark wrote: its queue's keys (every front has let go)."""
        subprocess.run(["redis-cli", "--cluster", "call", self.seeds.split(",")[0], "EVAL",
                        _DELETE_QUEUE, "0", f"emq:{{{QUEUE.decode()}}}:*",
                        QUEUE.decode()], capture_output=True, timeout=60)


_DELETE_QUEUE = """
local cursor = '0'
repeat
  local found = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = found[1]
  for _, key in ipairs(found[2]) do redis.call('DEL', key) end
until cursor == '0'
redis.call('ZREM', 'emq:queues', ARGV[2])
return 1
"""


def _slot(queue: bytes) -> int:
    from redis.crc import key_slot
    return key_slot(b"emq:{" + queue + b"}:owner")


async def _call(port: int, *argv: bytes | str | int) -> object:
    client = await Client.connect(port)
    try:
        return await client.call(*argv)
    finally:
        client.close()


async def _owner_first(fronts: list[Server]) -> list[Server]:
    """The fronts, the one the benchmark's queue goes to first, once each sees the
    other (a queue nobody owns goes to a live front below its share: fronts.py)."""
    deadline = time.monotonic() + 30
    for front in fronts:
        while b"emqd_cluster_fronts_live:%d" % len(fronts) not in await _call(  # type: ignore[operator]
                front.port, b"INFO", b"cluster"):
            if time.monotonic() > deadline:
                raise scenarios.BenchError("the fronts do not see each other")
            await asyncio.sleep(0.1)
    owner = await _call(fronts[0].port, b"EMQ.OWNER", QUEUE)
    return sorted(fronts, key=lambda front: owner != f"127.0.0.1:{front.port}".encode())


async def _front_cycle(front: Server, nodes: RedisCluster | GivenCluster,
                       sizes: Sizes) -> dict[str, float]:
    """The cycle through `front`, with each side's CPU per job."""
    target = EmqdTarget(front)
    front_cpu, node_cpu = front.cpu_seconds(), nodes.cpu_seconds()
    figures = await scenarios.cycle(target, sizes)
    front_cpu, node_cpu = front.cpu_seconds() - front_cpu, nodes.cpu_seconds() - node_cpu
    jobs = sizes.jobs
    cycle = {"cycle": figures["cycle"], "front.us": front_cpu / jobs * 1e6}
    if nodes.nodes:
        cycle.update({"nodes.us": node_cpu / jobs * 1e6,
                      "total.us": (front_cpu + node_cpu) / jobs * 1e6})
    return cycle


async def _add_rate(front: Server, sizes: Sizes) -> float:
    """Pipelined ADDs a second through `front` (`conns` connections, `pipeline` deep)."""
    started = time.perf_counter()
    await scenarios.fill(EmqdTarget(front), sizes.jobs, sizes.conns, sizes.pipeline)
    return sizes.jobs / (time.perf_counter() - started)


async def _worker_rates(owner: Server, other: Server, sizes: Sizes,
                        cpus: set[int] | None) -> dict[str, float]:
    """emqd-worker draining `worker_jobs` jobs given the owner's address, then given the
    other front's (each run's jobs added first, untimed, through the owner), and the
    ratio of the two rates."""
    rates = {}
    for name, front in (("owner", owner), ("other", other)):
        await scenarios.fill(EmqdTarget(owner), sizes.worker_jobs)
        completed = functools.partial(_completed_since, owner.port, await _completed(owner.port))
        run = workers.emqd_run_at(f"worker.{name}", f"redis://127.0.0.1:{front.port}", "async",
                                  WORKER_SLOTS)
        rates[name] = (await workers.drain(run, completed, sizes.worker_jobs, cpus, owner)).rate
    return {"worker.owner": rates["owner"], "worker.other": rates["other"],
            "worker.other/owner": rates["other"] / rates["owner"]}


WORKER_SLOTS = 50  # the cluster scenario's emqd-worker: the worker scenario's main figure


async def _completed(port: int) -> int:
    """The benchmark queue's jobs completed so far, read through the front at `port`."""
    return await workers.count(port, b"HGET", queue_keys(QUEUE).metrics_completed, b"count")


async def _completed_since(port: int, before: int) -> int:
    return await _completed(port) - before


async def _takeover_s(first: Server, second: Server, jobs: int) -> float:
    """Fill `jobs` through `first`, stop it, time `second`'s first answer, per 100,000 of
    the jobs the queue holds then: the earlier figures leave jobs of their own in it
    (the pipelined ADDs' 2 x `jobs`, what a stopped worker held), all of them loaded."""
    await scenarios.fill(EmqdTarget(first), jobs)
    first.stop()  # SIGTERM: its leases are let go at once
    client = await Client.connect(second.port)
    try:
        started = time.perf_counter()
        reply = await client.call(b"EMQ.STATS", QUEUE)
        seconds = time.perf_counter() - started
    finally:
        client.close()
    if not isinstance(reply, list) or b"pending" not in reply:
        raise scenarios.BenchError(f"EMQ.STATS after the takeover answered {reply!r}")
    counts = dict(zip(reply[::2], reply[1::2], strict=True))
    if counts[b"pending"] < jobs:
        raise scenarios.BenchError(f"{counts[b'pending']} of {jobs} jobs after the takeover")
    held: int = sum(counts[state] for state in (b"pending", b"active", b"scheduled",
                                                b"dead", b"completed"))
    return seconds * 100_000 / held


async def run(workdir: Path, sizes: Sizes, front_cpus: set[int] | None,
              node_cpus: set[int] | None, live: list[Server], given: str | None = None,
              ports: list[int] | None = None,
              worker_cpus: set[int] | None = None) -> dict[str, float]:
    """Every emqd figure of the `cluster` scenario (see the module's docstring); the
    servers it starts are in `live` while they run; the workers run on `worker_cpus`."""
    figures: dict[str, float] = {}
    rounds = [(None, None, "given")] if given else [(0, "0", "acks0"), (1, "1", "acks1")]
    for replicas, acks, label in rounds:
        nodes: RedisCluster | GivenCluster = GivenCluster(given) if given else \
            RedisCluster(workdir / label, 3, replicas or 0, node_cpus, live, ports)
        fronts: list[Server] = []
        try:
            await nodes.ready()
            for _ in range(2):
                fronts.append(start_emqd(str(workdir), front_cpus, "--cluster", nodes.seeds,
                                         *(("--cluster-acks", acks) if acks else ())))
                live.append(fronts[-1])
            owner, other = await _owner_first(fronts)
            cycle = await _front_cycle(owner, nodes, sizes)
            figures.update({f"{label}.{key}": value for key, value in cycle.items()})
            if replicas == 0 or given:
                for name, front in (("owner", owner), ("other", other)):
                    latency = await scenarios.latency(EmqdTarget(front), sizes)
                    figures.update({f"{name}.{key}": value for key, value in latency.items()})
                rates = {name: await _add_rate(front, sizes)
                         for name, front in (("owner", owner), ("other", other))}
                figures.update({"add.owner": rates["owner"], "add.other": rates["other"],
                                "add.other/owner": rates["other"] / rates["owner"]})
                figures.update(await _worker_rates(owner, other, sizes, worker_cpus))
                figures["takeover.s"] = await _takeover_s(owner, other, sizes.takeover_jobs)
        finally:
            for front in fronts:
                front.stop()
                live.remove(front)
            nodes.stop()
    return figures


async def scale(workdir: Path, sizes: Sizes, front_cpus: set[int] | None,
                node_cpus: set[int] | None, live: list[Server],
                ports: list[int] | None = None) -> dict[str, float]:
    """The `cluster-scale` figures (see the module's docstring)."""
    nodes = RedisCluster(workdir / "scale", 3, 1, node_cpus, live, ports)
    fronts: list[Server] = []
    try:
        await nodes.ready()
        for _ in range(2):
            fronts.append(start_emqd(str(workdir), front_cpus, "--cluster", nodes.seeds))
            live.append(fronts[-1])
        await _owner_first(fronts)
        queues = [b"bench%d" % i for i in range(sizes.scale_queues)]
        started = time.perf_counter()
        await asyncio.gather(*(_create(fronts[i % 2], queues[i::CREATORS])
                               for i in range(CREATORS)))
        figures = {"create.s": time.perf_counter() - started}
        await asyncio.sleep(IDLE_FIRST_S)
        primaries = nodes.primaries()
        cpu = [server.cpu_seconds() for server in (*fronts, *primaries)]
        await asyncio.sleep(IDLE_MEASURED_S)
        used = [(server.cpu_seconds() - before) / IDLE_MEASURED_S * 100
                for server, before in zip((*fronts, *primaries), cpu, strict=True)]
        figures["idle.front.%"] = max(used[:len(fronts)])
        figures["idle.primary.%"] = max(used[len(fronts):])
        times = []
        for queue in random.Random(1).sample(queues, CLAIMS):
            front = random.Random(queue).choice(fronts)
            client = await Client.connect(front.port)
            try:
                at = time.perf_counter()
                reply = await client.call(b"EMQ.CLAIM", queue, 30_000)
                times.append((time.perf_counter() - at) * 1000)
            finally:
                client.close()
            if not isinstance(reply, list) or not reply:
                raise scenarios.BenchError(f"CLAIM on {queue!r} answered {reply!r}")
        figures["claim.p50.ms"] = scenarios.percentile(times, 0.5)
        figures["claim.max.ms"] = max(times)
        return figures
    finally:
        for front in fronts:
            front.stop()
            live.remove(front)
        nodes.stop()


CREATORS = 20  # connections creating the scale scenario's queues, half through each front
IDLE_FIRST_S = 40.0  # the queues sit idle this long (owned ones are let go at 30 s)...
IDLE_MEASURED_S = 30.0  # ... then the CPU of the fronts and primaries is measured this long
CLAIMS = 100  # CLAIMs on queues taken at random, once idle


async def _create(front: Server, queues: list[bytes]) -> None:
    """One job in each of `queues`, one ADD at a time (each takes a queue)."""
    client = await Client.connect(front.port)
    try:
        for queue in queues:
            reply = await client.call(b"EMQ.ADD", queue, b"one")
            if not isinstance(reply, bytes):
                raise scenarios.BenchError(f"ADD to {queue!r} answered {reply!r}")
    finally:
        client.close()
