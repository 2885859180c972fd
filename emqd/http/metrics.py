"""/metrics: the Prometheus text exposition, built with prometheus_client.

Two kinds of figures, kept apart on purpose:

- **Read at scrape time** (`StoreCollector`, a custom collector): the job
  counts per state, the counters kept in the store (they survive a restart
  because they are in the keyspace and the log), the latency, the lanes, and
  the server's own figures. All come from `reading.py` and `Core`, so
  a scrape is O(queues) and counts no rows.
- **Observed as it happens** (`Timings`): the histograms of a job's wait
  (from when it could be claimed to its claim) and duration (claim to
  complete), fed by the events each committed plan carries
  (`emqd/commit/events.py`). These live in memory and start empty at each start, as
  a process's histograms do. The log's fsyncs and the loop's lag are timed by
  the core itself (emqd/serve/server_stats.py, emqd/serve/histogram.py: the fsyncs from the
  everysec thread too) and read at scrape time.

In cluster mode each front reports what it serves: the queues it owns now (an
idle queue is owned by none: it has no series until it is used again) and its
own server figures, every series labelled `front` with the front's announced
address (`FrontLabelled`), so that scraping every front and summing by queue
(`sum by (queue) (emqd_jobs)`) gives the cluster's figures, whichever front
owns a queue and however often it moved.

Queue names are bytes and Prometheus labels are UTF-8 text: a name that is not
UTF-8 is shown with its bad bytes as `\\xNN` escapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from emqd import __version__
from emqd.commit.events import CLAIMED, COMPLETED, Event
from emqd.core import Core
from emqd.http import reading
from emqd.persist.aof import AppendOnlyFile
from emqd.serve.histogram import Histogram as Durations
from emqd.serve.process_memory import rss_bytes

# Jobs last from milliseconds to hours; the default buckets stop at 10 s.
JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

COUNTER_HELP = {
    "added": "Jobs added (EMQ.ADD that created a job)",
    "completed": "Jobs completed",
    "failures": "Failed attempts: EMQ.FAIL calls, retried or not (the jobs that died are "
                "emqd_jobs_dead_total)",
    "retried": "Failures that scheduled a retry",
    "dead": "Jobs that died (dead-lettered)",
    "stalled": "Counted stall recoveries (a lease ran out under a live server)",
    "revived": "Dead jobs revived",
    "cancelled": "Jobs cancelled (EMQ.CANCEL), running or not",
}


def label(name: bytes) -> str:
    """A queue name as a label value: UTF-8, its bad bytes as `\\xNN`."""
    return name.decode("utf-8", "backslashreplace")


class Timings:
    """The histograms fed as things happen (events, fsyncs)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.wait = Histogram(
            "emqd_job_wait_seconds",
            "Time from when a job could be claimed (its creation, due time or return to "
            "pending) to its claim",
            ["queue"], buckets=JOB_BUCKETS, registry=registry)
        self.duration = Histogram(
            "emqd_job_duration_seconds", "Time from a job's claim to its completion",
            ["queue"], buckets=JOB_BUCKETS, registry=registry)
        self._children: dict[tuple[str, bytes], Any] = {}

    def _child(self, histogram: Histogram, kind: str, queue: bytes) -> Any:
        child = self._children.get((kind, queue))
        if child is None:
            child = self._children[(kind, queue)] = histogram.labels(label(queue))
        return child

    def listen(self, events: list[Event]) -> None:
        """A commit path's listener (`Commit.listen`): O(events), two comparisons for most."""
        for name, queue, _id, _ts, extra in events:
            if name == CLAIMED:
                value, histogram, kind = extra and extra.get("wait_ms"), self.wait, "wait"
            elif name == COMPLETED:
                value, histogram, kind = extra and extra.get("duration_ms"), self.duration, "run"
            else:
                continue
            if type(value) is int:
                self._child(histogram, kind, queue).observe(max(0, value) / 1000)


class StoreCollector:
    """The figures read at scrape time, from the store and the server's state."""

    def __init__(self, core: Core, blocked: Callable[[], int],
                 now_ms: Callable[[], int]) -> None:
        self.core = core
        self.blocked = blocked
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        yield from self._queues()
        yield from self._server()

    def _queues(self) -> Iterator[Metric]:
        keyspace = self.core.keyspace
        now = self.now_ms()
        jobs = GaugeMetricFamily("emqd_jobs", "Jobs in each state (completed: rows retained)",
                                 labels=["queue", "state"])
        totals = {name: CounterMetricFamily(f"emqd_jobs_{name}", help_, labels=["queue"])
                  for name, help_ in COUNTER_HELP.items()}
        latency = GaugeMetricFamily("emqd_queue_latency_seconds",
                                    "Age of the job a claim would take next (0: none waits)",
                                    labels=["queue"])
        paused = GaugeMetricFamily("emqd_queue_paused", "1 when the queue is paused",
                                   labels=["queue"])
        lanes = GaugeMetricFamily("emqd_lanes", "Lanes with waiting jobs and a free slot",
                                  labels=["queue"])
        lane_active = GaugeMetricFamily("emqd_lane_active", "Lanes with at least one active job",
                                        labels=["queue"])
        for queue in reading.queue_names(keyspace):
            figures = reading.queue_figures(keyspace, queue, now)
            name = label(queue)
            for state, count in figures.counts.items():
                if count is not None:
                    jobs.add_metric([name, state], count)
            for counter, value in figures.totals.items():
                if value is not None:
                    totals[counter].add_metric([name], value)
            if figures.latency_ms is not None:
                latency.add_metric([name], figures.latency_ms / 1000)
            paused.add_metric([name], int(figures.paused))
            if figures.lanes_ready or figures.lanes_active:
                lanes.add_metric([name], figures.lanes_ready or 0)
                lane_active.add_metric([name], figures.lanes_active or 0)
        yield jobs
        yield from totals.values()
        yield from (latency, paused, lanes, lane_active)

    def _server(self) -> Iterator[Metric]:
        state = self.core
        yield GaugeMetricFamily("emqd_up", "1 while emqd serves", value=1)
        yield GaugeMetricFamily("emqd_start_time_seconds", "When this process started (Unix time)",
                                value=state.started_ms / 1000)
        info = InfoMetricFamily("emqd", "This emqd's version and epoch (run_id)")
        info.add_metric([], {"version": __version__, "run_id": state.run_id})
        yield info
        yield GaugeMetricFamily("emqd_connected_clients", "Open RESP connections",
                                value=len(state.clients))
        yield GaugeMetricFamily("emqd_blocked_clients", "Clients parked in a blocking claim",
                                value=self.blocked())
        calls = CounterMetricFamily("emqd_commands", "Commands run, by name", labels=["command"])
        for command, tally in sorted(state.stats.command_calls.items()):
            calls.add_metric([command], tally.n)
        yield calls
        sink = state.commit.sink
        if isinstance(sink, AppendOnlyFile):
            yield GaugeMetricFamily("emqd_aof_size_bytes", "Size of the append-only file",
                                    value=sink.size)
        yield GaugeMetricFamily("emqd_memory_rss_bytes", "Resident memory of the process",
                                value=rss_bytes())
        yield _histogram("emqd_loop_lag_seconds",
                         "How late the event loop ran its timers (a stall: one sample)",
                         state.stats.loop_lag)
        yield _histogram("emqd_aof_fsync_seconds",
                         "Time an fsync of the append-only file took", state.stats.fsyncs)


def _histogram(name: str, documentation: str, durations: Durations) -> HistogramMetricFamily:
    """One of the core's histograms (emqd/serve/histogram.py) as Prometheus reads it."""
    buckets = [(floatToGoString(bound), count)
               for bound, count in zip(durations.bounds_s, durations.cumulative, strict=False)]
    buckets.append(("+Inf", durations.cumulative[-1]))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=durations.sum_s)


class FrontLabelled:
    """Every series of `inner`, labelled `front` (cluster mode: the front's address)."""

    def __init__(self, inner: CollectorRegistry, front: str) -> None:
        self.inner = inner
        self.front = front

    def collect(self) -> Iterator[Metric]:
        for metric in self.inner.collect():
            labelled = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            labelled.samples = [sample._replace(labels={**sample.labels, "front": self.front})
                                for sample in metric.samples]
            yield labelled


class Metrics:
    """The registry /metrics serves: the store's figures and the observed histograms."""

    def __init__(self, core: Core, blocked: Callable[[], int],
                 now_ms: Callable[[], int], front: str | None = None) -> None:
        # `*_created` series are noise for a server's own histograms (its start
        # time is emqd_start_time_seconds); the switch is the library's, per process.
        disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=False)
        self.timings = Timings(self.registry)
        self.registry.register(StoreCollector(core, blocked, now_ms))
        self.exposed = self.registry
        if front is not None:  # cluster mode: every series says which front reports it
            self.exposed = CollectorRegistry(auto_describe=False)
            self.exposed.register(FrontLabelled(self.registry, front))

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The body and its content type, in the format the scraper's Accept asks for."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.exposed), content_type
