"""Compaction: rewrite the append-only file as the shortest commands that rebuild the keyspace.

No fork: the snapshot is taken on the event loop, in slices, copy-on-write.
When the rewrite starts (time t0) it notes every key; slices then write each
key's value as `HSET key f v f v ...` / `ZADD key s m s m ...` (at most
`ITEMS_PER_COMMAND` items a command) to a temp file beside the log. Before a
plan writes a key that is not written out yet, `capture(ops)` keeps that key's
t0 value (a copy, or the object itself when the op deletes it; FLUSHALL keeps
the whole table as it was), so the snapshot is exactly the keyspace at t0,
whatever happens while it is taken. Every record logged after t0 is buffered
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
from collections.abc import Callable

from emqd.persist.records import append_command
from emqd.plan import Op
from emqd.store.keyspace import Keyspace

log = logging.getLogger("emqd")

ITEMS_PER_COMMAND = 512  # fields or members per HSET / ZADD of the new file
SLICE_ITEMS = 20_000  # fields or members written per slice before the loop gets a turn

_HSET = b"HSET"
_ZADD = b"ZADD"


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
        self.records: list[bytes] = []  # the log's records since t0, in order
        self.cancelled = False
        self._syncing = False  # a thread is fsyncing `fd`: it is closed when that ends
        self._on_snapshot_synced = on_snapshot_synced
        self._on_failed = on_failed
        self._source = keyspace.data  # where keys not yet written hold their t0 value
        self._frozen = False  # `_source` is a copy nobody writes (after a FLUSHALL)
        self._keys = list(keyspace.data)
        self._cursor = 0
        self._pending = set(self._keys)  # t0 keys neither written out nor captured
        self._captured: dict[bytes, tuple[bool, dict]] = {}  # key -> (is_zset, t0 items)
        self._current: tuple[bytes, bool, list] | None = None  # a big value, written in parts
        self._current_at = 0
        asyncio.get_running_loop().call_soon(self._slice)

    # --- copy-on-write: called by ServerState.commit before a plan is applied ----
    def capture(self, ops: list[Op]) -> None:
        """Keep the t0 value of every not-yet-written key that `ops` are about to change."""
        if self._frozen:
            return
        pending = self._pending
        for op in ops:
            name = op[0]
            if name == b"FLUSHALL":
                # The values stay as they are: after the flush nobody else holds them.
                self._source = dict(self._source)
                self._frozen = True
                return
            if name == b"DEL":
                for key in op[1:]:
                    if key in pending:
                        pending.discard(key)
                        self._captured[key] = _items(self._source[key], copy=False)
            elif op[1] in pending:
                key = op[1]
                pending.discard(key)
                self._captured[key] = _items(self._source[key], copy=True)

    def add_records(self, data: bytes) -> None:
        """Records the log wrote after t0; they go after the snapshot."""
        self.records.append(data)

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
                self._start_value(key, is_zset, list(items.items()))
                continue
            key = self._next_key()
            if key is None:
                break
            is_zset, items = _items(self._source[key], copy=False)
            if len(items) > SLICE_ITEMS:
                self._start_value(key, is_zset, list(items.items()))  # a stable copy
                continue
            _append_value(key, is_zset, list(items.items()), out)
            budget -= len(items) + 1
        try:
            self._write(b"".join(out))
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
        keys, pending = self._keys, self._pending
        while self._cursor < len(keys):
            key = keys[self._cursor]
            self._cursor += 1
            if key in pending:
                pending.discard(key)
                return key
        return None

    def _start_value(self, key: bytes, is_zset: bool, items: list) -> None:
        self._current = (key, is_zset, items)
        self._current_at = 0

    def _write_current(self, out: list[bytes], budget: int) -> int:
        key, is_zset, items = self._current  # type: ignore[misc]
        start = self._current_at
        whole_commands = max(1, budget // ITEMS_PER_COMMAND) * ITEMS_PER_COMMAND
        stop = min(len(items), start + whole_commands)
        _append_value(key, is_zset, items[start:stop], out)
        self._current_at = stop
        if stop >= len(items):
            self._current = None
        return stop - start + 1

    def _synced(self, future: asyncio.Future) -> None:
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
        data = b"".join(self.records)
        self.records.clear()
        self._write(data)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.size += len(data)

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


def _items(value: dict | object, copy: bool) -> tuple[bool, dict]:
    """(is_zset, field -> value or member -> score) of a stored value."""
    if type(value) is dict:
        return False, dict(value) if copy else value
    scores = value.scores  # type: ignore[attr-defined]
    return True, dict(scores) if copy else scores


def _append_value(key: bytes, is_zset: bool, items: list, out: list[bytes]) -> None:
    """HSET key f v ... or ZADD key s m ..., `ITEMS_PER_COMMAND` items a command."""
    for start in range(0, len(items), ITEMS_PER_COMMAND):
        chunk = items[start : start + ITEMS_PER_COMMAND]
        args: list = [_ZADD if is_zset else _HSET, key]
        if is_zset:
            for member, score in chunk:
                args.append(score)
                args.append(member)
        else:
            for name, value in chunk:
                args.append(name)
                args.append(value)
        append_command(args, out)
