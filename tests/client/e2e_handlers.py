"""Handlers that the end-to-end tests run in `emqd-worker` subprocesses.

`chaos` and `chaos_sync` decide from (job id, token) alone, so a run's fate is
reproducible: mostly quick success, sometimes an exception, sometimes a hang
far past the worker's timeout. Every run first records its side effect,
`id token pid`, in $EMQD_E2E_LOG/<pid>.log, so a test can find the runs
whose holder was later superseded. The result names the run that completed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time

from emqd.client import Job

FAIL_RATE = 0.15
HANG_RATE = 0.03
HANG_S = 3.0


def _record(job: Job) -> None:
    path = os.path.join(os.environ["EMQD_E2E_LOG"], f"{os.getpid()}.log")
    with open(path, "a") as log:
        log.write(f"{job.id} {job.token} {os.getpid()}\n")


def _fate(job: Job) -> str:
    roll = random.Random(f"{job.id}:{job.token}").random()
    return "fail" if roll < FAIL_RATE else "hang" if roll < FAIL_RATE + HANG_RATE else "ok"


async def chaos(job: Job) -> str:
    _record(job)
    fate = _fate(job)
    if fate == "fail":
        raise ValueError(f"unlucky run {job.token}")
    await asyncio.sleep(HANG_S if fate == "hang" else 0.002)
    return f"{job.token} {os.getpid()}"


def chaos_sync(job: Job) -> str:
    _record(job)
    fate = _fate(job)
    if fate == "fail":
        raise ValueError(f"unlucky run {job.token}")
    time.sleep(HANG_S if fate == "hang" else 0.002)
    return f"{job.token} {os.getpid()}"


async def sleepy(job: Job) -> str:
    """Sleeps as long as the payload's `sleep` says (seconds)."""
    await asyncio.sleep(json.loads(job.payload)["sleep"])
    return "slept"


async def quick(job: Job) -> str:
    """Completes at once: for tests of the worker's own behaviour."""
    return "ok"
