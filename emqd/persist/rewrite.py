"""Compaction: rewrite the append-only file as the shortest commands that rebuild the keyspace.

No fork: the snapshot is taken on the event loop, in slices, copy-on-write.
When the rewrite starts (time t0) it notes every key; slices then write each
key's value as `HSET key f v f v ...` / `ZADD key s m s m ...` (at most
`ITEMS_PER_COMMAND` items a command) to a temp file beside the log. Before a
plan writes a key that is not written out yet, `capture(ops)` keeps that key's
t0 value (a copy, or the object itself when the op deletes it; after a
FLUSHALL nothing changes the t0 objects), so the snapshot is exactly the
keyspace at t0, whatever happens while it is taken. A big value is written over several
slices straight from the live mapping; a plan about to change it first makes
the rest come from a copy. Every record logged after t0 is buffered
(`add_records`) and goes after the snapshot: replaying the new file gives the
keyspace of now. The file is fsynced in a thread, then the log (`aof.py`)
appends the last records, fsyncs, renames it over the old one and fsyncs the
directory. Until the rename the old file is complete, after it the new one is:
a crash at any instant loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any

from emqd.commit.plan import Op
from emqd.persist.records import runs
from emqd.persist.values import ITEMS_PER_COMMAND, append_value, items_of
from emqd.store.keyspace import Keyspace

log = logging.getLogger("emqd")

SLICE_ITEMS = 4_000  # fields or members written per slice (a few ms) before the loop gets a turn


class Rewrite:
    """One compaction in progress; `aof.py` owns it and finishes the swap."""

    def __init__(
        self,
        keyspace: Keyspace,
        temp_path: str,
        on_snapshot_synced: Callable[[Rewrite], None],
        on_failed: Callable[[], None],
    ) -> None:
        self.temp_path = temp_path
        self.started = time.monotonic()
        self.fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.size = 0
        self.records: list[bytes | memoryview] = []  # the log's records since t0, in order
        self.cancelled = False
        self._syncing = False  # a thread is fsyncing `fd`: it is closed when that ends
        self._on_snapshot_synced = on_snapshot_synced
        self._on_failed = on_failed
        # Every key of t0 and its value object (a dict copy: about 40 ms for 1M
        # keys). A key not yet done still holds its t0 value in that object:
        # `capture` takes the key before anything changes it.
        self._t0 = keyspace.data.copy()
        self._keys = iter(self._t0)
        self._done: set[bytes] = set()  # t0 keys written out or captured
        self._frozen = False  # after a FLUSHALL nobody changes the t0 objects any more
        # key -> (is_zset, t0 items)
        self._captured: dict[bytes, tuple[bool, Mapping[Any, Any]]] = {}
        # A big value written over several slices: its key, kind, the pairs
        # still to write, how many were written, and the live mapping they
        # come from (None once they come from a copy nobody writes).
        self._current: Iterator[tuple[Any, ...]] | None = None
        self._current_key = b""
        self._current_is_zset = False
        self._current_done = 0
        self._current_live: Mapping[Any, Any] | None = None
        asyncio.get_running_loop().call_soon(self._slice)

    # --- copy-on-write: called by the commit path before a plan is applied ------
    def capture(self, ops: list[Op]) -> None:
        """Keep the t0 value of every not-yet-written key that `ops` are about to change."""
        if self._frozen:
            return
        t0, done = self._t0, self._done
        for op in ops:
            name = op[0]
            if name == b"FLUSHALL":
                self._frozen = True  # it drops the t0 objects without changing them
                return
            keys = op[1:] if name == b"DEL" else op[1:2]
            for key in keys:
                if self._current_live is not None and key == self._current_key:
                    self._detach_current()
                if key in t0 and key not in done:
                    done.add(key)
                    # DEL drops the value without changing it: no copy needed.
                    self._captured[key] = items_of(t0[key], copy=name != b"DEL")

    def add_records(self, pieces: list[bytes | memoryview]) -> None:
        """Records the log wrote after t0 (in the pieces it wrote them in); they go after
        the snapshot."""
        self.records += pieces

    # --- the snapshot, in slices on the loop --------------------------------------
    def _slice(self) -> None:
        if self.cancelled:
            return
        out: list[bytes] = []
        budget = SLICE_ITEMS
        while budget > 0:
            if self._current is not None:
                budget -= self._write_current(out, budget)
                continue
            if self._captured:
                key, (is_zset, items) = self._captured.popitem()
                self._start_value(key, is_zset, items, live=False)
                continue
            next_key = self._next_key()
            if next_key is None:
                break
            key = next_key
            is_zset, items = items_of(self._t0[key], copy=False)
            if len(items) > SLICE_ITEMS:
                self._start_value(key, is_zset, items, live=not self._frozen)
                continue
            append_value(key, is_zset, list(items.items()), out)
            budget -= len(items) + 1
        try:
            for piece in runs(out):  # a big value goes from itself, uncopied
                self._write(piece)
        except OSError as exc:
            self.fail(exc)
            return
        loop = asyncio.get_running_loop()
        if budget > 0:  # nothing left: the snapshot is whole
            self._syncing = True
            future = loop.run_in_executor(None, os.fsync, self.fd)
            future.add_done_callback(self._synced)
        else:
            loop.call_soon(self._slice)

    def _next_key(self) -> bytes | None:
        done = self._done
        for key in self._keys:
            if key not in done:
                done.add(key)
                return key
        return None

    def _start_value(self, key: bytes, is_zset: bool, items: Mapping[Any, Any],
                     live: bool) -> None:
        self._current = iter(items.items())
        self._current_key = key
        self._current_is_zset = is_zset
        self._current_done = 0
        self._current_live = items if live else None

    def _detach_current(self) -> None:
        """A plan is about to change the big value being written: go on from a copy."""
        copy = dict(self._current_live)  # type: ignore[arg-type]
        self._current = islice(iter(copy.items()), self._current_done, None)
        self._current_live = None

    def _write_current(self, out: list[bytes], budget: int) -> int:
        wanted = max(1, budget // ITEMS_PER_COMMAND) * ITEMS_PER_COMMAND  # whole commands
        items = list(islice(self._current, wanted))  # type: ignore[arg-type]
        append_value(self._current_key, self._current_is_zset, items, out)
        self._current_done += len(items)
        if len(items) < wanted:
            self._current = self._current_live = None
        return len(items) + 1

    def _synced(self, future: asyncio.Future[None]) -> None:
        self._syncing = False
        if self.cancelled:
            os.close(self.fd)
            return
        exc = future.exception()
        if exc is not None:
            self.fail(exc)
            return
        self._on_snapshot_synced(self)

    # --- the end ---------------------------------------------------------------------
    def write_records(self) -> None:
        """Append the buffered records (raises OSError; the caller fails the rewrite)."""
        pieces = runs(self.records)  # a big value among them is written from itself
        self.records.clear()
        for piece in pieces:
            self._write(piece)

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        size = len(view)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.size += size

    def fail(self, exc: BaseException) -> None:
        log.error("AOF rewrite failed: %s; the current file stays in use", exc)
        self.cancel()
        self._on_failed()

    def cancel(self) -> None:
        """Give up: the temp file goes, the current file stays as it is."""
        if self.cancelled:
            return
        self.cancelled = True
        try:
            os.unlink(self.temp_path)
        except OSError:
            pass
        if not self._syncing:
            os.close(self.fd)
