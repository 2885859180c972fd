"""Dramatiq's side of emqd-bench's `worker` scenario (emqd/bench/workers.py).

`dramatiq emqd.bench.dramatiq_tasks --processes 1 --threads C` runs the no-op
actor; `python -m emqd.bench.dramatiq_tasks N` enqueues N messages of ~100
bytes. The broker is the redis-server of $EMQD_BENCH_DRAMATIQ_URL. Dramatiq is
not a dependency of emqd: this module is imported only when it is installed.
"""

from __future__ import annotations

import os
import sys

import dramatiq
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url=os.environ["EMQD_BENCH_DRAMATIQ_URL"]))
PAYLOAD = "p" * 92


@dramatiq.actor(max_retries=0)
def noop(payload: str) -> None:
    """Returns at once: the scenario measures the worker, not the handler."""


if __name__ == "__main__":
    for _ in range(int(sys.argv[1])):
        noop.send(PAYLOAD)
