"""The Python client and worker for emqd: the queues on redis-py, the Worker on
pipelining connections of its own (emqd/client/link.py).

    from emqd.client import (Queue, SyncQueue, Worker, Retry, Discard, NewJob, Child,
                             JobDead, WaitTimeout, ConnectionLost, PermanentError)

See docs/CLIENT.md.
"""

from emqd.client.commands import (
    Added,
    Child,
    ChildInfo,
    FailVerdict,
    Finished,
    Flow,
    Job,
    JobInfo,
    Lane,
    NewJob,
    QueueEvent,
    Schedule,
    Stats,
)
from emqd.client.errors import (
    ConnectionLost,
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

__all__ = ["Added", "Child", "ChildInfo", "ConnectionLost", "Counts", "Discard", "FailVerdict",
           "Finished", "Flow", "Job", "JobDead", "JobInfo", "JobStateError", "Lane", "NewJob",
           "PermanentError", "Queue", "QueueEvent", "Retry", "Schedule", "StaleJob", "Stats",
           "SyncQueue", "WaitTimeout", "Worker"]
