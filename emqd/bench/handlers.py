"""The no-op handlers the `worker` scenario runs in `emqd-worker` (and a test may).

They do nothing on purpose: the scenario measures what the worker costs a job,
so the handler must cost nothing of its own.
"""

from __future__ import annotations

from emqd.client.commands import Job


async def noop_async(job: Job) -> None:
    """An `async def` handler that returns at once."""


def noop_sync(job: Job) -> None:
    """A plain `def` handler that returns at once (run in the worker's threads)."""
