"""The `cluster` scenario: emqd fronts over a Redis Cluster the benchmark starts itself.

For emqd it starts a cluster of 3 primaries (redis-server in cluster mode) and
two fronts, and measures, through the first front:

- the job cycle on the cluster without replicas (`--cluster-acks 0`), and on
  one with a replica each and `--cluster-acks 1`;
- the server CPU each job costs, summed over every process (the front, and
  the cluster's nodes), and the front's and the nodes' shares;
- the latency of ADD, CLAIM and COMPLETE through the owner of the queue and
  through the other front (a forwarding hop);
- the time a takeover takes per 100,000 jobs: the owner stops cleanly (its
  lease is let go at once), and the other front answers the queue's next
  request once it loaded the queue.

For redis it measures the same cycle and latency on one redis-server running
the Lua scripts (Redis + Lua doing the same work on one node), so the table
shows each figure beside the single node's. With two cores the front runs on
CPU 0 and the cluster's nodes on CPU 1, as a front and a primary would on
different machines.
"""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import time
from pathlib import Path

from emqd.bench import scenarios
from emqd.bench.client import Client
from emqd.bench.scenarios import QUEUE, Sizes
from emqd.bench.servers import Server, redis_server_path, start_emqd
from emqd.bench.targets import EmqdTarget

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
    """`primaries` redis-server nodes in cluster mode, `replicas` each, joined; each node
    is also in `live` (the run's servers, stopped on an interrupt) while it runs."""

    def __init__(self, workdir: Path, primaries: int, replicas: int,
                 cpus: set[int] | None, live: list[Server]) -> None:
        self.nodes: list[Server] = []
        self.live = live
        try:
            for port in cluster_ports(primaries * (1 + replicas)):
                node_dir = workdir / f"node-{port}"
                node_dir.mkdir(parents=True)
                argv = [redis_server_path() or "redis-server", "--port", str(port), "--bind",
                        "127.0.0.1", "--cluster-enabled", "yes", "--cluster-node-timeout",
                        "2000", "--save", "", "--appendonly", "no", "--dir", str(node_dir),
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

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
            if node in self.live:
                self.live.remove(node)


async def _front_cycle(front: Server, nodes: RedisCluster, sizes: Sizes) -> dict[str, float]:
    """The cycle through `front`, with each side's CPU per job."""
    target = EmqdTarget(front)
    front_cpu, node_cpu = front.cpu_seconds(), nodes.cpu_seconds()
    figures = await scenarios.cycle(target, sizes)
    front_cpu, node_cpu = front.cpu_seconds() - front_cpu, nodes.cpu_seconds() - node_cpu
    jobs = sizes.jobs
    return {"cycle": figures["cycle"], "front.us": front_cpu / jobs * 1e6,
            "nodes.us": node_cpu / jobs * 1e6, "total.us": (front_cpu + node_cpu) / jobs * 1e6}


async def _takeover_s(first: Server, second: Server, jobs: int) -> float:
    """Fill `jobs` through `first`, stop it, time `second`'s first answer (per 100,000)."""
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
    pending = reply[reply.index(b"pending") + 1]
    if pending != jobs:
        raise scenarios.BenchError(f"{pending} of {jobs} jobs after the takeover")
    return seconds * 100_000 / jobs


async def run(workdir: Path, sizes: Sizes, front_cpus: set[int] | None,
              node_cpus: set[int] | None, live: list[Server]) -> dict[str, float]:
    """Every emqd figure of the scenario (see the module's docstring); the servers it
    starts are in `live` while they run."""
    figures: dict[str, float] = {}
    for replicas, acks, label in ((0, "0", "acks0"), (1, "1", "acks1")):
        nodes = RedisCluster(workdir / label, 3, replicas, node_cpus, live)
        fronts: list[Server] = []
        try:
            await nodes.ready()
            for _ in range(2):
                fronts.append(start_emqd(str(workdir), front_cpus, "--cluster", nodes.seeds,
                                         "--cluster-acks", acks))
                live.append(fronts[-1])
            cycle = await _front_cycle(fronts[0], nodes, sizes)
            figures.update({f"{label}.{key}": value for key, value in cycle.items()})
            if replicas == 0:
                for name, front in (("owner", fronts[0]), ("other", fronts[1])):
                    latency = await scenarios.latency(EmqdTarget(front), sizes)
                    figures.update({f"{name}.{key}": value for key, value in latency.items()})
                figures["takeover.s"] = await _takeover_s(fronts[0], fronts[1],
                                                          sizes.takeover_jobs)
        finally:
            for front in fronts:
                front.stop()
                live.remove(front)
            nodes.stop()
    return figures
