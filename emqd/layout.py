"""Every key name of the protocol's section 1, built in one place.

`p` is a queue's prefix, `emq:{QUEUE}:`; the braces put every key of one queue
in one Redis Cluster hash slot. `QueueKeys` is cached per queue name because
the hot verbs build the same names on every call.
"""

from __future__ import annotations

from typing import Final

QUEUES: Final = b"emq:queues"  # zset: queue name -> creation time


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
        "cancelled",
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
        "waiting",
        "children_prefix",
        "results_prefix",
        "repeats",
        "repeat_prefix",
        "unique",
        "unique_ttl",
        "rate_log",
        "lane_rates",
        "lane_rate_prefix",
        "rated",
        "workers",
        "minutes",
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
        self.cancelled = p + b"cancelled"  # jobs EMQ.CANCEL ended; score = time of cancel
        self.meta = p + b"meta"
        self.config = p + b"config"
        self.metrics_failed = p + b"metrics:failed"
        self.metrics_completed = p + b"metrics:completed"
        # the other counters: failed, retried, stalled, revived, cancelled
        self.metrics = p + b"metrics"
        self.ring = p + b"ring"
        self.gactive = p + b"gactive"
        self.glimit = p + b"glimit"
        self.job_prefix = p + b"job:"
        self.lane_prefix = p + b"lane:"
        self.log_prefix = p + b"log:"  # a job's log lines (emqd/rules/job_log.py)
        # the Pub/Sub channel of its transitions (emqd/commit/queue_events.py)
        self.events = p + b"events"
        # flows (rules/flows.py): parents waiting for their children, and each parent's record
        self.waiting = p + b"waiting"
        self.children_prefix = p + b"children:"
        self.results_prefix = p + b"results:"
        # repeatable jobs (verbs/repeat.py): name -> next slot, and each schedule's hash
        self.repeats = p + b"repeats"
        self.repeat_prefix = p + b"repeat:"
        # unique jobs (rules/unique.py): key -> the job holding it; the keys that expire
        self.unique = p + b"unique"
        self.unique_ttl = p + b"unique:ttl"
        # rate limits (rules/rates.py): the queue's claims in its window, the lanes' limits
        # and windows, and the lanes held out of the ring until their window frees
        self.rate_log = p + b"rate:claims"
        self.lane_rates = p + b"grate"
        self.lane_rate_prefix = p + b"rate:lane:"
        self.rated = p + b"rated"
        # what operators asked of workers (verbs/worker_order.py): name -> "quiet|stop <ms>"
        self.workers = p + b"workers"
        # the metrics history (rules/minutes.py): a record a minute, in hour blocks
        self.minutes = p + b"minutes"

    def job(self, job_id: bytes) -> bytes:
        return self.job_prefix + job_id

    def lane(self, group: bytes) -> bytes:
        return self.lane_prefix + group

    def log(self, job_id: bytes) -> bytes:
        return self.log_prefix + job_id

    def children(self, job_id: bytes) -> bytes:
        return self.children_prefix + job_id

    def results(self, job_id: bytes) -> bytes:
        return self.results_prefix + job_id

    def repeat(self, name: bytes) -> bytes:
        return self.repeat_prefix + name

    def lane_rate_log(self, group: bytes) -> bytes:
        return self.lane_rate_prefix + group


def split_job_key(key: bytes) -> tuple[bytes, bytes] | None:
    """(queue, id) of a job row key `emq:{QUEUE}:job:ID` (a flow's links), or None."""
    if not key.startswith(b"emq:{"):
        return None
    end = key.find(b"}:job:", 5)
    if end < 5:
        return None
    queue, job_id = key[5:end], key[end + 6:]
    if not job_id or 0x7B in queue:  # a queue name holds no brace: the first `}` ends it
        return None
    return queue, job_id


_cache: Final[dict[bytes, QueueKeys]] = {}
_CACHE_MAX: Final = 4096


def queue_keys(queue: bytes) -> QueueKeys:
    """The (cached) key names of `queue`; the name must already be validated."""
    keys = _cache.get(queue)
    if keys is None:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        keys = _cache[queue] = QueueKeys(queue)
    return keys
