"""The append-only file while the server runs: append, fsync, hold replies, compact.

`open_log(config, state)` loads DIR/emqd.aof into the keyspace (cutting a torn
last record once the load succeeded), then returns the `AppendOnlyFile` that
`ServerState.commit` hands every plan to, as one record.

Records are buffered and written with one write(2) before any reply leaves:
`Server.write` asks `hold(conn, data)` whenever `busy` is set, and a callback
at the end of the loop iteration writes what no reply asked for (housekeeping).
Then, by `--appendfsync`:

- `always`: replies wait. At the end of the iteration one fsync covers every
  plan of the iteration (group commit), then the held replies are sent, in
  order. A connection about to close (QUIT) commits at once instead.
- `everysec`: a thread fsyncs at most a second behind; the loop never waits.
- `no`: the OS decides.

A write or fsync that fails ends the process: the plan is applied in memory
but not in the file, so its reply must never leave.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from emqd import clock
from emqd.config import Config
from emqd.persist.load import load
from emqd.persist.records import encode_records
from emqd.persist.rewrite import Rewrite
from emqd.plan import Op

if TYPE_CHECKING:
    from emqd.server_state import ServerState
    from emqd.wire.protocol import Connection

log = logging.getLogger("emqd")

FILENAME = "emqd.aof"
TEMP_SUFFIX = ".rewrite.tmp"


def open_log(config: Config, state: ServerState) -> AppendOnlyFile:
    """Load the file into `state.keyspace`, then open it for appending.

    Raises `LoadError` (damage: nothing on disk changed) or OSError (among
    them: another emqd holds the directory).
    """
    path = os.path.join(config.dir, FILENAME)
    dir_lock = _lock_dir(config.dir)
    started = time.monotonic()
    loaded = load(path, state.keyspace)
    if loaded.torn_bytes:
        log.warning(
            "%s: dropped a torn last record (%d bytes at offset %d, a crash mid-write); "
            "cutting the file there",
            path, loaded.torn_bytes, loaded.size,
        )
        with open(path, "r+b") as file:
            file.truncate(loaded.size)
            os.fsync(file.fileno())
    log.info("loaded %s: %d bytes, %d keys in %.3fs",
             path, loaded.size, len(state.keyspace), time.monotonic() - started)
    # The loaded keyspace lives as long as the process: keep the cyclic
    # collector from scanning its millions of objects again and again.
    gc.freeze()
    try:
        os.unlink(path + TEMP_SUFFIX)  # a rewrite that a crash interrupted
        log.info("removed an unfinished rewrite (%s)", path + TEMP_SUFFIX)
    except FileNotFoundError:
        pass
    aof = AppendOnlyFile(path, config.appendfsync, config.aof_rewrite_min_size, state)
    aof.dir_lock = dir_lock
    state.aof = aof
    state.log = aof.log
    state.info_fields.setdefault("persistence", []).append(aof.info)
    return aof


class AppendOnlyFile:
    """The open log. Lives on the event loop; only the everysec thread is elsewhere."""

    def __init__(self, path: str, policy: str, rewrite_min_size: int, state: ServerState,
                 fsync: Any = os.fsync) -> None:
        self.path = path
        self.policy = policy
        self.always = policy == "always"
        self.rewrite_min_size = rewrite_min_size
        self.state = state
        self._fsync = fsync
        self._loop = asyncio.get_running_loop()
        created = not os.path.exists(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:  # the new name must survive a power cut as the records in it will
            _fsync_dir(os.path.dirname(path) or ".")
        self.size = os.fstat(self.fd).st_size
        self.base_size = self.size  # the size after the last compaction (or the load)
        self.records: list[list[Op]] = []  # logged, not yet written
        self.held: list[tuple[Connection, bytes]] = []  # replies waiting for the fsync
        self.busy = False  # records to write or replies held: Server.write must ask
        self._scheduled = False
        self.written = 0  # bytes written since start, and the part of them fsynced
        self.synced = 0
        self.rewrite: Rewrite | None = None
        self.rewrites = 0
        self.last_rewrite_ok = True
        self.last_rewrite_s = -1
        self._fd_lock = threading.Lock()  # the fd the everysec thread dups vs. the swap
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dir_lock: int | None = None  # the directory's fd, flocked while the log is open
        if policy == "everysec":
            self._thread = threading.Thread(target=self._everysec, name="emqd-fsync", daemon=True)
            self._thread.start()

    # --- the hot path ------------------------------------------------------------
    def log(self, ops: list[Op]) -> None:
        """One plan's record; written before any reply of this loop iteration leaves."""
        self.records.append(ops)
        self.busy = True
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.end_of_iteration)

    def hold(self, conn: Connection, data: bytes) -> bool:
        """Called by Server.write while `busy`: True when the reply is held for the fsync."""
        if not self.always:
            self.write_records()
            self.busy = False
            return False
        if conn.session.close_after_reply:  # QUIT: the socket closes right after this write
            self.end_of_iteration()
            return False
        self.held.append((conn, data))
        return True

    def end_of_iteration(self) -> None:
        """Write what is buffered; under `always`, fsync once, then send the held replies."""
        self._scheduled = False
        self.write_records()
        if self.always and self.synced != self.written:
            self.sync()
        held, self.held = self.held, []
        self.busy = False
        for conn, data in held:
            if not conn.closed and conn.transport is not None:
                conn.transport.write(data)

    def write_records(self) -> None:
        if not self.records:
            return
        data = encode_records(self.records)
        self.records.clear()
        try:
            _write_all(self.fd, data)
        except OSError as exc:
            _fatal(f"cannot write {self.path}: {exc}")
        self.size += len(data)
        self.written += len(data)
        if self.rewrite is not None:
            self.rewrite.add_records(data)
        elif self.size > self.rewrite_min_size and self.size > 2 * self.base_size:
            self.start_rewrite()

    def sync(self) -> None:
        """fsync everything written so far (on the loop)."""
        target = self.written
        try:
            self._fsync(self.fd)
        except OSError as exc:
            _fatal(f"cannot fsync {self.path}: {exc}")
        self.synced = max(self.synced, target)

    def _everysec(self) -> None:
        while not self._stop.wait(1.0):
            target = self.written
            if target == self.synced:
                continue
            with self._fd_lock:
                fd = os.dup(self.fd)
            try:
                self._fsync(fd)
                self.synced = max(self.synced, target)
            except OSError as exc:
                log.error("background fsync of %s failed: %s", self.path, exc)
            finally:
                os.close(fd)

    # --- SAVE, shutdown --------------------------------------------------------
    def save(self) -> None:
        """Everything applied so far is on disk when this returns (SAVE)."""
        self.end_of_iteration()
        if self.synced != self.written:
            self.sync()
        self.state.last_save_s = clock.now_ms() // 1000
        self.state.dirty = 0

    def close(self) -> None:
        """Shutdown: write, fsync, send the held replies; a rewrite in progress is dropped."""
        if self.rewrite is not None:
            self.rewrite.cancel()
            self._rewrite_done(False)
        self.save()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        os.close(self.fd)
        if self.dir_lock is not None:
            os.close(self.dir_lock)
        self.state.log = None
        self.state.aof = None

    # --- compaction ----------------------------------------------------------------
    def start_rewrite(self) -> bool:
        """Start a background compaction (none may be running); False when it cannot start."""
        self.write_records()  # what is logged so far belongs to the snapshot
        try:
            self.rewrite = Rewrite(self.state.keyspace, self.path + TEMP_SUFFIX, self._swap,
                                   self.rewrite_failed)
        except OSError as exc:
            log.error("cannot start an AOF rewrite: %s", exc)
            self._rewrite_done(False)
            return False
        self.state.before_apply = self.rewrite.capture
        log.info("AOF rewrite started (%d keys)", len(self.state.keyspace))
        return True

    def _swap(self, rewrite: Rewrite) -> None:
        """The snapshot is on disk: append the records since, fsync, rename, switch."""
        if rewrite is not self.rewrite:
            return
        self.write_records()
        try:
            rewrite.write_records()
            self._fsync(rewrite.fd)
            os.rename(rewrite.temp_path, self.path)
        except OSError as exc:
            rewrite.fail(exc)  # calls rewrite_failed
            return
        _fsync_dir(os.path.dirname(self.path) or ".")
        with self._fd_lock:
            old, self.fd = self.fd, rewrite.fd
        os.close(old)
        self.synced = self.written
        self.size = self.base_size = rewrite.size
        self._rewrite_done(True)
        log.info("AOF rewrite done: %d bytes in %.3fs",
                 self.size, time.monotonic() - rewrite.started)

    def _rewrite_done(self, ok: bool) -> None:
        rewrite = self.rewrite
        self.rewrite = None
        self.state.before_apply = None
        self.last_rewrite_ok = ok
        if not ok:
            self.base_size = self.size  # the next automatic try waits for the file to double again
        if rewrite is not None:
            self.last_rewrite_s = int(time.monotonic() - rewrite.started)
        if ok:
            self.rewrites += 1
            self.state.last_save_s = clock.now_ms() // 1000

    def rewrite_failed(self) -> None:
        """The Rewrite gave up on its own (a write error): forget it."""
        self._rewrite_done(False)

    # --- INFO persistence ----------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The `aof_*` fields of INFO's persistence section (Redis's names)."""
        rewrite = self.rewrite
        return {
            "aof_enabled": 1,
            "aof_rewrite_in_progress": int(rewrite is not None),
            "aof_rewrite_scheduled": 0,
            "aof_last_rewrite_time_sec": self.last_rewrite_s,
            "aof_current_rewrite_time_sec":
                int(time.monotonic() - rewrite.started) if rewrite is not None else -1,
            "aof_last_bgrewrite_status": "ok" if self.last_rewrite_ok else "err",
            "aof_rewrites": self.rewrites,
            "aof_last_write_status": "ok",
            "aof_current_size": self.size,
            "aof_base_size": self.base_size,
            "aof_pending_rewrite": 0,
            "aof_pending_bio_fsync": 0,
            "aof_delayed_fsync": 0,
        }


def _lock_dir(path: str) -> int | None:
    """Refuse to share a directory: two processes appending to one file would interleave."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(f"{path} is in use by another emqd (one process per --dir)") from None
    except OSError as exc:  # a file system without flock: go on, unguarded
        log.warning("cannot lock %s (%s); make sure no other emqd uses it", path, exc)
        os.close(fd)
        return None
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: str) -> None:
    """Make a rename durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        log.warning("fsync of directory %s failed: %s", path, exc)
    finally:
        os.close(fd)


def _fatal(message: str) -> None:
    """The file no longer holds what memory holds: stop before any reply claims otherwise."""
    log.critical("%s; exiting so that no unlogged write is acknowledged", message)
    logging.shutdown()
    os._exit(1)
