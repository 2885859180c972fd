"""The Python client and worker for emqd, on redis-py's asyncio client.

    from emqd.client import Queue, SyncQueue, Worker, Retry, Discard

See docs/CLIENT.md.
"""

from emqd.client.commands import FailVerdict, Job, JobInfo, Lane, NewJob, Stats
from emqd.client.errors import Discard, JobStateError, PermanentError, Retry, StaleJob
from emqd.client.queue import Queue, SyncQueue
from emqd.client.worker import Counts, Worker

__all__ = ["Counts", "Discard", "FailVerdict", "Job", "JobInfo", "JobStateError", "Lane",
           "NewJob", "PermanentError", "Queue", "Retry", "StaleJob", "Stats", "SyncQueue",
           "Worker"]
