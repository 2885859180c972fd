"""What the whole server shares: config, keyspace, epoch, clients, and the one write path.

One instance is built by `server.py` and reached through each `Session`; there
is no module-level mutable server. `commit(plan)` is the single write path:
every plan (verbs, plain Redis writes, housekeeping) is applied to the
keyspace, handed to the append-only log as one record, shown to housekeeping
(its due times) and to the event listeners (metrics, Pub/Sub), in that order,
by plain calls a reader can follow.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from emqd import clock
from emqd.config import LOG_LEVELS, Config
from emqd.events import Listener
from emqd.loop_lag import LoopLag
from emqd.output_limit import OutputLimit
from emqd.plan import Plan
from emqd.pubsub import PubSub
from emqd.store.keyspace import Keyspace

if TYPE_CHECKING:
    from emqd.housekeeping import Housekeeping
    from emqd.persist.aof import AppendOnlyFile
    from emqd.session import Session


def normal_limit(config: Config) -> OutputLimit | None:
    if not (config.normal_hard_limit or config.normal_soft_limit):
        return None
    return OutputLimit(config.normal_hard_limit, config.normal_soft_limit,
                       config.normal_soft_seconds)


def new_run_id() -> str:
    """40 hex characters, drawn at every start, like Redis's run_id."""
    return secrets.token_hex(20)


class Tally:
    """How many times a command ran. A counter object per name, so that a call costs
    a dict read and an integer add, where an int in the dict cost a read, a write
    and a boxed int (~30 ns of a PING)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


class ServerState:
    def __init__(self, config: Config, run_id: str | None = None) -> None:
        self.config = config
        self.keyspace = Keyspace()
        self._set_limits(config)
        self.run_id = run_id or new_run_id()
        self.run_id_bytes = self.run_id.encode()
        self.started_ms = clock.now_ms()
        self.clients: dict[int, Session] = {}
        self.total_commands = 0
        self.command_calls: dict[str, Tally] = {}  # full name -> its calls (/metrics)
        self.total_connections = 0
        self.rejected_connections = 0  # refused at maxclients
        self.output_limit_disconnections = 0  # clients closed by emqd/wire/delivery.py
        # `client-output-buffer-limit normal`, or None when both its limits are 0
        # (the default): Server._send checks it after every write when set.
        self.normal_limit = normal_limit(config)
        # How late the event loop runs (emqd/loop_lag.py): INFO's latest and
        # worst lag, and a cumulative histogram for /metrics.
        self.loop_lag = LoopLag()
        # INFO: section name -> callables adding fields to it (housekeeping adds
        # its `housekeeping_*` counters to "stats", the log its `aof_*` fields to
        # "persistence", the server `blocked_clients` to "clients").
        self.info_fields: dict[str, list[Callable[[], dict[str, object]]]] = {}
        self.dirty = 0  # writes since the last save, as Redis's rdb_changes_since_last_save
        self.last_save_s = self.started_ms // 1000
        self.aof: AppendOnlyFile | None = None  # the open log (persist/aof.py), when on
        self.housekeeping: Housekeeping | None = None  # the server's clock work, once started
        # Called with each committed plan's events (emqd/events.py), in plan order, once
        # the plan is in the log's buffer (an EXEC's plans: at its end, with its record).
        self.listeners: list[Listener] = []
        self._batch: list[Plan] | None = None  # plans of an EXEC in progress
        self.shutdown_requested: Callable[[], None] | None = None
        self.pubsub = PubSub()  # channels and patterns -> sessions; publish() from anywhere
        # Called with the seconds each fsync of the log took, from the loop and from
        # the everysec thread (so it must be thread-safe): /metrics' histogram.
        self.on_fsync: Callable[[float], None] | None = None

    # --- CONFIG SET and CONFIG RESETSTAT ---------------------------------------------
    def reconfigure(self, changes: dict[str, Any]) -> None:
        """Settings changed at run time (CONFIG SET, already validated): a new Config
        replaces the old, and the parts that keep a setting of their own are told."""
        old = self.config
        new = self.config = dataclasses.replace(old, **changes)
        self._set_limits(new)
        self.normal_limit = normal_limit(new)
        if new.loglevel != old.loglevel:
            logging.getLogger("emqd").setLevel(LOG_LEVELS[new.loglevel])
        if self.aof is not None:
            self.aof.reconfigure(new)
        if self.housekeeping is not None:
            self.housekeeping.reconfigure(old, new)

    def _set_limits(self, config: Config) -> None:
        """The store's copy of Redis's encoding thresholds, read at every write."""
        limits = self.keyspace.limits
        limits.hash_entries = config.hash_max_listpack_entries
        limits.hash_value = config.hash_max_listpack_value
        limits.zset_entries = config.zset_max_listpack_entries
        limits.zset_value = config.zset_max_listpack_value

    def reset_stats(self) -> None:
        """CONFIG RESETSTAT: INFO's counters start again from 0 (its `stats` section).

        /metrics keeps its own counters (per-command calls, the jobs' counters in
        the store): a Prometheus counter only goes back to 0 with the process.
        """
        self.total_commands = 0
        self.total_connections = 0
        self.rejected_connections = 0
        self.output_limit_disconnections = 0
        self.loop_lag.reset_worst()
        if self.housekeeping is not None:
            self.housekeeping.counters.reset()

    def commit(self, plan: Plan) -> None:
        """Apply a plan's ops and log them as one record (or into the open EXEC)."""
        ops = plan.ops
        if not ops:
            return
        aof = self.aof
        if aof is not None and aof.rewrite is not None:
            aof.rewrite.capture(ops)  # a compaction keeps the old values of what changes
        shape = plan.shape
        if shape is not None:
            shape.applier.apply(self.keyspace, ops)
        else:
            self.keyspace.apply(ops)
        self.dirty += len(ops)
        if self._batch is not None:
            self._batch.append(plan)
        elif aof is not None:
            aof.append(plan)
        due = plan.due
        if (due is None or due) and self.housekeeping is not None:
            self.housekeeping.learn(plan)
        if plan.events and self._batch is None:
            for listener in self.listeners:
                listener(plan.events)

    def begin_batch(self) -> None:
        """From here to `end_batch`, commits are logged together (EXEC)."""
        self._batch = []

    def end_batch(self) -> None:
        """Log the EXEC's plans as one record, then show the listeners their events, in
        order: only now does the log hold what they tell of (emqd/queue_events.py)."""
        plans, self._batch = self._batch, None
        if plans and self.aof is not None:
            self.aof.append_batch(plans)
        for plan in plans or ():
            if plan.events:
                for listener in self.listeners:
                    listener(plan.events)
