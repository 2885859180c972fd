"""The Python client and worker for emqd, on redis-py's asyncio client.

    from emqd.client import Queue, SyncQueue, Worker, Retry, Discard

See docs/CLIENT.md.
"""

from emqd.client.commands import (
    FailVerdict,
    Finished,
    Job,
    JobInfo,
    Lane,
    NewJob,
    QueueEvent,
    Stats,
)
from emqd.client.errors import (
    Discard,
    JobDead,
    JobStateError,
    PermanentError,
    Retry,
    StaleJob,
    WaitTimeout,
)
from emqd.client.queue import Queue, SyncQueue
from emqd.client.worker import Counts, Worker

__all__ = ["Counts", "Discard", "FailVerdict", "Finished", "Job", "JobDead", "JobInfo",
           "JobStateError", "Lane", "NewJob", "PermanentError", "Queue", "QueueEvent", "Retry",
           "StaleJob", "Stats", "SyncQueue", "WaitTimeout", "Worker"]
