"""The clients of one front during a partition scenario, run inside the front's host.

    python -m tests.partition.load --port 6390 --name f1 --queues a,b --seconds 20 \\
        --out f1.jsonl [--producers 2] [--workers 2] [--lease-ms 3000] [--block-ms 500]

Producers add jobs with ids of their own (`NAME-pI-N`), each sent again after
an error until it is answered with its id (an ADD with an id is idempotent);
the last producer sends no id but a payload of its own (`--producers` counts
it), and does not send an ADD again after an error: the server picks the id,
and two jobs with one payload are an ADD applied twice;
workers claim with BLOCK, one job a time, and complete what they got (a
COMPLETE sent again after TRYAGAIN, until OK, EMQSTALE, or the end). Every
request is written to `--out` as one JSON line when it ends: what it was, its
queue, job and token, when it started and ended (wall clock, seconds), and
whether it was answered OK or with which error (history.py judges them).
The front's password, if any, is EMQD_PASSWORD. Every loop stops by itself: no
request starts after `--seconds` (or after a SIGINT: the caller's scenario ended
sooner), and each is given up after ONE_REQUEST_S.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import time
from typing import IO, Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

ONE_REQUEST_S = 120.0  # a request still unanswered then is recorded as such, and given up
SETTLE_S = 10.0  # a COMPLETE is sent again after TRYAGAIN for this long after the end


class Recorder:
    def __init__(self, out: IO[str], name: str) -> None:
        self.out = out
        self.name = name

    async def call(self, client: aioredis.Redis, op: str, queue: str, fields: dict[str, Any],
                   *argv: Any) -> tuple[Any, str | None]:
        started = time.time()
        reply: Any = None
        error: str | None = None
        try:
            reply = await asyncio.wait_for(client.execute_command(*argv), ONE_REQUEST_S)
        except (redis.RedisError, OSError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        record = {"client": self.name, "op": op, "queue": queue, "t0": started,
                  "t1": time.time(), "error": error, **fields}
        if op == "claim" and error is None and reply:
            record["id"], record["token"] = reply[0].decode(), reply[1].decode()
        elif op == "add" and error is None and "id" not in record:
            record["id"] = reply.decode()  # the id the server picked
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()
        return reply, error


class Stop:
    """When requests stop starting: `seconds` from now, or sooner at a SIGINT."""

    def __init__(self, seconds: float) -> None:
        self.at = time.time() + seconds

    def now(self) -> None:
        self.at = min(self.at, time.time())

    def passed(self) -> bool:
        return time.time() >= self.at


def connect(port: int) -> aioredis.Redis:
    """A client that never sends a request again by itself (redis-py's default retries
    would hide from the history what was sent twice)."""
    return aioredis.Redis(port=port, socket_timeout=ONE_REQUEST_S, socket_connect_timeout=3,
                          retry=Retry(NoBackoff(), 0), password=os.environ.get("EMQD_PASSWORD"))


async def producer(port: int, name: str, queues: list[str], stop: Stop,
                   recorder: Recorder, with_ids: bool) -> None:
    rng = random.Random(name)
    client = connect(port)
    try:
        n = 0
        queue = rng.choice(queues)
        while not stop.passed():
            job_id = f"{name}-{n}"
            if with_ids:
                reply, error = await recorder.call(client, "add", queue, {"id": job_id},
                                                   "EMQ.ADD", queue, b"work", "ID", job_id)
            else:
                reply, error = await recorder.call(client, "add", queue, {"payload": job_id},
                                                   "EMQ.ADD", queue, job_id)
            if error is None or not with_ids:
                n += 1
                queue = rng.choice(queues)
            await asyncio.sleep(0.02 if error is None else 0.1)
    finally:
        await client.aclose()


async def worker(port: int, name: str, queues: list[str], stop: Stop, lease_ms: int,
                 block_ms: int, recorder: Recorder) -> None:
    rng = random.Random(name)
    client = connect(port)
    try:
        while not stop.passed():
            queue = rng.choice(queues)
            got, error = await recorder.call(client, "claim", queue, {"block_ms": block_ms},
                                             "EMQ.CLAIM", queue, lease_ms, "BLOCK", block_ms)
            if error is not None:
                await asyncio.sleep(0.1)
                continue
            if not got:
                continue
            job_id, token = got[0].decode(), got[1].decode()
            while time.time() < stop.at + SETTLE_S:
                _, error = await recorder.call(client, "complete", queue,
                                               {"id": job_id, "token": token},
                                               "EMQ.COMPLETE", queue, job_id, token)
                if error is None or "TRYAGAIN" not in error:
                    break  # done, or stale (the lease moved on): either way not ours now
                await asyncio.sleep(0.1)
    finally:
        await client.aclose()


async def main(args: argparse.Namespace) -> None:
    queues = args.queues.split(",")
    stop = Stop(args.seconds)
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.now)
    with open(args.out, "a") as out:
        recorder = Recorder(out, args.name)
        await asyncio.gather(
            *(producer(args.port, f"{args.name}-p{i}", queues, stop, recorder,
                       with_ids=i < args.producers - 1) for i in range(args.producers)),
            *(worker(args.port, f"{args.name}-w{i}", queues, stop, args.lease_ms,
                     args.block_ms, recorder) for i in range(args.workers)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--queues", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lease-ms", type=int, default=3000)
    parser.add_argument("--block-ms", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
