"""How fast a worker drains a preloaded queue, and what CPU it spends a job.

The `worker` scenario (emqd/bench/workers.py) starts a worker process against a
queue already holding N jobs and watches the queue from outside, the same way
for every system: a count of finished jobs read every few milliseconds. The
window runs from the first finished job seen to the last, so the worker's
start-up (imports, connecting) is not counted, and the worker's CPU over the
same window (its whole process tree, from /proc) is divided by the jobs
finished in it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.002  # how often the finished count is read
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


class DrainError(RuntimeError):
    """The worker did not drain the queue (it died, or stopped finishing jobs)."""


@dataclass(frozen=True)
class Drain:
    jobs: int  # finished inside the window
    seconds: float
    cpu_seconds: float  # the worker's process tree over the window
    server_cpu_seconds: float  # the server's (emqd's, or the redis-server's) over the window

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.cpu_seconds / self.jobs * 1e6

    @property
    def server_cpu_us(self) -> float:
        return self.server_cpu_seconds / self.jobs * 1e6


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and every live descendant (all their threads)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = _stat_fields(current)
        except OSError:
            continue  # gone meanwhile
        total += int(fields[11]) + int(fields[12])
        todo += _children(current)
    return total * TICK_S


async def watch(proc: subprocess.Popen[bytes], finished: Callable[[], Awaitable[int]],
                total: int, timeout_s: float, server_pid: int) -> Drain:
    """Read `finished()` until it reaches `total`; the window from the first finished
    job seen to the last. Raises DrainError when the worker exits first, or when
    nothing more finishes for `timeout_s`."""
    first_at = first_cpu = first_server = 0.0
    first_done = 0
    last_done, last_change = 0, time.monotonic()
    while True:
        done = await finished()
        now = time.monotonic()
        if done and not first_done:
            first_at, first_cpu, first_done = now, tree_cpu_seconds(proc.pid), done
            first_server = tree_cpu_seconds(server_pid)
        if done >= total:
            cpu = tree_cpu_seconds(proc.pid) - first_cpu
            server = tree_cpu_seconds(server_pid) - first_server
            if first_done >= total:
                raise DrainError("the queue was drained before the first look: add more jobs")
            return Drain(total - first_done, now - first_at, cpu, server)
        if done != last_done:
            last_done, last_change = done, now
        elif now - last_change > timeout_s:
            raise DrainError(f"{done} of {total} jobs finished, then none for {timeout_s} s")
        if proc.poll() is not None:
            raise DrainError(f"the worker exited ({proc.returncode}) after {done} of {total}")
        await asyncio.sleep(POLL_S)
