"""What the whole server shares: config, keyspace, epoch, clients, the log hook.

One instance is built by `server.py` and reached through each `Session`; there
is no module-level mutable server. `commit(ops)` is the single write path:
every plan (verbs, plain Redis writes, housekeeping) is applied to the
keyspace and handed to the append-only log as one record.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from emqd import clock
from emqd.config import Config
from emqd.events import Listener
from emqd.plan import Op
from emqd.store.keyspace import Keyspace

if TYPE_CHECKING:
    from emqd.persist.aof import AppendOnlyFile
    from emqd.session import Session


def new_run_id() -> str:
    """40 hex characters, drawn at every start, like Redis's run_id."""
    return secrets.token_hex(20)


class ServerState:
    def __init__(self, config: Config, run_id: str | None = None) -> None:
        self.config = config
        self.keyspace = Keyspace()
        self.run_id = run_id or new_run_id()
        self.run_id_bytes = self.run_id.encode()
        self.started_ms = clock.now_ms()
        self.clients: dict[int, Session] = {}
        self.total_commands = 0
        self.command_calls: dict[str, int] = {}  # full name -> calls (INFO commandstats, /metrics)
        self.total_connections = 0
        self.rejected_connections = 0  # refused at maxclients
        # INFO: section name -> callables adding fields to it (housekeeping adds
        # its `housekeeping_*` counters to "stats", the log its `aof_*` fields to
        # "persistence", the server `blocked_clients` to "clients").
        self.info_fields: dict[str, list[Callable[[], dict[str, object]]]] = {}
        self.dirty = 0  # writes since the last save, as Redis's rdb_changes_since_last_save
        self.last_save_s = self.started_ms // 1000
        # The append-only log's entry point: called with each record's ops
        # (one plan, or all of an EXEC). None while persistence is off.
        self.log: Callable[[list[Op]], None] | None = None
        self.aof: AppendOnlyFile | None = None  # the open log (persist/aof.py), when on
        # Called with a plan's ops before they are applied while a compaction
        # runs (it keeps the old values of the keys they change).
        self.before_apply: Callable[[list[Op]], None] | None = None
        self._batch: list[Op] | None = None  # ops of an EXEC in progress
        self.shutdown_requested: Callable[[], None] | None = None
        # Re-runs parked requests whose keys were written; housekeeping calls
        # it after its plans (connections call it after each batch).
        self.wake: Callable[[], None] = lambda: None
        # Sees every committed plan's ops after they are applied (housekeeping
        # learns of new due times here); None costs the write path one test.
        self.observe: Callable[[list[Op]], None] | None = None
        # Called with each committed plan's events (emqd/events.py), in plan order.
        self.listeners: list[Listener] = []

    def commit(self, ops: list[Op]) -> None:
        """Apply a plan's ops and log them as one record (or into the open EXEC)."""
        if not ops:
            return
        if self.before_apply is not None:
            self.before_apply(ops)
        self.keyspace.apply(ops)
        self.dirty += len(ops)
        if self.observe is not None:
            self.observe(ops)
        if self._batch is not None:
            self._batch.extend(ops)
        elif self.log is not None:
            self.log(ops)

    def begin_batch(self) -> None:
        """From here to `end_batch`, commits are logged together (EXEC)."""
        self._batch = []

    def end_batch(self) -> None:
        ops, self._batch = self._batch, None
        if ops and self.log is not None:
            self.log(ops)
