"""Memory of many lanes: `lanes` jobs, each in a lane of its own, in emqd and in Redis.

    python3 -m emqd.bench.lanes_memory [--lanes 10000] [--repeat 3]

Issue 26's target: 10,000 lanes with a job each cost at most 2x Redis's memory
for the same keys. The same keys are had without a second implementation:
emqd (`--appendonly yes`) adds the jobs, then a redis-server loads emqd's
append-only file as its own (docs/PERSISTENCE.md), so both hold exactly the
keys, fields and members the verbs wrote. Printed, as medians over `repeat`
fresh pairs of servers: the store's bytes (`INFO memory` used_memory, less an
empty server's) and the resident memory (RSS, less the same server's before the
jobs for emqd, less an empty redis-server's for Redis), and MEMORY USAGE of one
lane key on each. Servers are started on free loopback ports and stopped by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
from pathlib import Path

from emqd.bench.client import Client, ReplyError, encode
from emqd.bench.servers import Server, new_workdir, start_emqd, start_redis

QUEUE = b"bench"
PAYLOAD = b"p" * 100
PIPELINE = 1000


async def ask(port: int, *argv: bytes | str | int) -> object:
    client = await Client.connect(port)
    try:
        reply = await client.call(*argv)
    finally:
        client.close()
    if isinstance(reply, ReplyError):
        raise RuntimeError(f"{argv!r} answered {reply}")
    return reply


async def used_memory(port: int) -> int:
    info = await ask(port, b"INFO", b"memory")
    assert isinstance(info, bytes)
    for line in info.decode().splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    raise RuntimeError("no used_memory in INFO memory")


async def lane_usage(port: int) -> float:
    """MEMORY USAGE of the first lane's key."""
    reply = await ask(port, b"MEMORY", b"USAGE", b"emq:{bench}:lane:g000000")
    assert isinstance(reply, int), reply
    return float(reply)


async def add_lanes(port: int, lanes: int) -> None:
    client = await Client.connect(port)
    try:
        for start in range(0, lanes, PIPELINE):
            replies = await client.pipeline(
                [encode(b"EMQ.ADD", QUEUE, PAYLOAD, b"GROUP", b"g%06d" % i)
                 for i in range(start, min(start + PIPELINE, lanes))])
            for reply in replies:
                if isinstance(reply, ReplyError):
                    raise RuntimeError(f"EMQ.ADD answered {reply}")
    finally:
        client.close()


async def one_pair(lanes: int) -> dict[str, float]:
    """emqd adds the jobs; a redis-server loads its log: both sides' figures."""
    emqd_dir, redis_dir, empty_dir = new_workdir(), new_workdir(), new_workdir()
    servers: list[Server] = []
    try:
        emqd = start_emqd(emqd_dir, None, "--appendonly", "yes", "--appendfsync", "no")
        servers.append(emqd)
        rss0, used0 = emqd.rss_bytes(), await used_memory(emqd.port)
        await add_lanes(emqd.port, lanes)
        await asyncio.sleep(0.2)
        figures = {"emqd.rss": (emqd.rss_bytes() - rss0) / lanes,
                   "emqd.used": (await used_memory(emqd.port) - used0) / lanes,
                   "emqd.lane_usage": await lane_usage(emqd.port)}
        emqd.stop()
        shutil.copy(Path(emqd_dir) / "emqd.aof", Path(redis_dir) / "emqd.aof")
        empty = start_redis(empty_dir, None)
        servers.append(empty)
        redis = start_redis(redis_dir, None, "--appendonly", "yes", "--appendfilename",
                            "emqd.aof")
        servers.append(redis)
        keys = await ask(redis.port, b"DBSIZE")
        assert isinstance(keys, int) and keys >= lanes, f"redis-server loaded {keys} keys"
        figures["redis.rss"] = (redis.rss_bytes() - empty.rss_bytes()) / lanes
        figures["redis.used"] = (await used_memory(redis.port)
                                 - await used_memory(empty.port)) / lanes
        figures["redis.lane_usage"] = await lane_usage(redis.port)
        return figures
    finally:
        for server in servers:
            server.stop()
        for workdir in (emqd_dir, redis_dir, empty_dir):
            shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lanes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [asyncio.run(one_pair(args.lanes)) for _ in range(args.repeat)]
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(f"{args.lanes:,} lanes, one job each (100-byte payload), median of {args.repeat}")
    print(f"{'bytes per lane':32} {'emqd':>10} {'redis':>10} {'emqd/redis':>11}")
    for what, key in (("store (INFO used_memory)", "used"), ("resident (RSS)", "rss"),
                      ("MEMORY USAGE of one lane key", "lane_usage")):
        emqd, redis = median[f"emqd.{key}"], median[f"redis.{key}"]
        print(f"{what:32} {emqd:10,.0f} {redis:10,.0f} {emqd / redis:11.2f}")


if __name__ == "__main__":
    main()
