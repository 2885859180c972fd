"""Every key name of the protocol's section 1, built in one place.

`p` is a queue's prefix, `emq:{QUEUE}:`; the braces put every key of one queue
in one Redis Cluster hash slot. `QueueKeys` is cached per queue name because
the hot verbs build the same names on every call.
"""

from __future__ import annotations

QUEUES = b"emq:queues"  # zset: queue name -> creation time


class QueueKeys:
    """The key names of one queue."""

    __slots__ = (
        "queue",
        "prefix",
        "pending",
        "active",
        "scheduled",
        "dead",
        "completed",
        "meta",
        "config",
        "metrics_failed",
        "metrics_completed",
        "metrics",
        "ring",
        "gactive",
        "glimit",
        "job_prefix",
        "lane_prefix",
        "log_prefix",
        "events",
    )

    def __init__(self, queue: bytes) -> None:
        p = b"emq:{" + queue + b"}:"
        self.queue = queue
        self.prefix = p
        self.pending = p + b"pending"
        self.active = p + b"active"
        self.scheduled = p + b"scheduled"
        self.dead = p + b"dead"
        self.completed = p + b"completed"
        self.meta = p + b"meta"
        self.config = p + b"config"
        self.metrics_failed = p + b"metrics:failed"
        self.metrics_completed = p + b"metrics:completed"
        self.metrics = p + b"metrics"  # the other counters: failed, retried, stalled, revived
        self.ring = p + b"ring"
        self.gactive = p + b"gactive"
        self.glimit = p + b"glimit"
        self.job_prefix = p + b"job:"
        self.lane_prefix = p + b"lane:"
        self.log_prefix = p + b"log:"  # a job's log lines (emqd/verbs/job_log.py)
        self.events = p + b"events"  # the Pub/Sub channel of its transitions (emqd/queue_events.py)

    def job(self, job_id: bytes) -> bytes:
        return self.job_prefix + job_id

    def lane(self, group: bytes) -> bytes:
        return self.lane_prefix + group

    def log(self, job_id: bytes) -> bytes:
        return self.log_prefix + job_id


_cache: dict[bytes, QueueKeys] = {}
_CACHE_MAX = 4096


def queue_keys(queue: bytes) -> QueueKeys:
    """The (cached) key names of `queue`; the name must already be validated."""
    keys = _cache.get(queue)
    if keys is None:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        keys = _cache[queue] = QueueKeys(queue)
    return keys
