"""The append-only file while the server runs: append, write, fsync, compact.

`open_log(config, keyspace)` loads DIR/emqd.aof into the keyspace (cutting a
torn last record once the load succeeded, its bytes kept beside it:
persist/check.py), then returns the `AppendOnlyFile`, the commit path's sink
(emqd/commit/sink.py, emqd/commit/path.py): every plan is handed to it as one record.

The log knows no connection. It buffers records (`append`), writes them with
one write(2) (`write`) and fsyncs (`sync`), and says how far the file holds
them (`durable`). The commit path decides when each reply may leave: once the
record of its plan is written, or under `--appendfsync always` fsynced (one
fsync for every plan of a loop iteration, in `flush`: group commit). With
`everysec` a thread fsyncs at most a second behind; with `no` the OS decides.

A write or fsync that fails (a full disk) does not stop the server: the
records stay buffered and are written first, byte for byte, when the disk
takes them again; meanwhile `failing` says why, the dispatcher refuses write
commands with Redis's `MISCONF` error, the replies that depend on the
unwritten records wait, and everything else (reads, other clients) goes on.
The server retries every second and accepts writes again by itself.

A record holding a big value (persist/records.py) is buffered as its parts and
written part by part, the value from itself: the log never makes a copy of a
200 MiB HSET to write it.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from emqd import clock
from emqd.commit.plan import Op, Plan
from emqd.commit.sink import Sink
from emqd.config import Config
from emqd.persist.check import cut
from emqd.persist.dirlock import lock_dir
from emqd.persist.load import load
from emqd.persist.records import batch_record, record, runs
from emqd.persist.rewrite import Rewrite
from emqd.store.keyspace import Keyspace

FsyncTimer = Callable[[float], None]  # told each fsync's seconds, from any thread

log = logging.getLogger("emqd")

FILENAME = "emqd.aof"
TEMP_SUFFIX = ".rewrite.tmp"


def open_log(config: Config, keyspace: Keyspace,
             fsync_timer: FsyncTimer | None = None) -> AppendOnlyFile:
    """Load the file into `keyspace`, then open it for appending.

    `fsync_timer` is told how long each fsync took (/metrics).
    Raises `LoadError` (damage: nothing on disk changed) or OSError (among
    them: another emqd holds the directory).
    """
    path = os.path.join(config.dir, FILENAME)
    dir_lock = lock_dir(config.dir)
    started = time.monotonic()
    loaded = load(path, keyspace)
    if loaded.torn_bytes:
        copy = cut(path, loaded.size, whole_copy=False)
        log.warning(
            "%s: dropped a torn last record (%d bytes at offset %d, a crash mid-write); "
            "cut the file there, keeping those bytes in %s",
            path, loaded.torn_bytes, loaded.size, copy,
        )
    log.info("loaded %s: %d bytes, %d keys in %.3fs",
             path, loaded.size, len(keyspace), time.monotonic() - started)
    # The loaded keyspace lives as long as the process: keep the cyclic
    # collector from scanning its millions of objects again and again.
    gc.freeze()
    try:
        os.unlink(path + TEMP_SUFFIX)  # a rewrite that a crash interrupted
        log.info("removed an unfinished rewrite (%s)", path + TEMP_SUFFIX)
    except FileNotFoundError:
        pass
    aof = AppendOnlyFile(path, config.appendfsync, config.aof_rewrite_min_size, keyspace,
                         fsync_timer)
    aof.dir_lock = dir_lock
    return aof


class AppendOnlyFile(Sink):
    """The open log. Lives on the event loop; only the everysec thread is elsewhere.

    Offsets count the bytes of records since start: `appended` (handed to the
    log), `written` (in the file: write(2) returned) and `synced` (fsynced). A
    reply may leave once the log holds its plan: `durable` has reached the
    `appended` of the moment the reply was made (emqd/commit/path.py).
    """

    def __init__(self, path: str, policy: str, rewrite_min_size: int, keyspace: Keyspace,
                 fsync_timer: FsyncTimer | None = None, fsync: Any = os.fsync,
                 write: Any = os.write, exit: Callable[[int], Any] = os._exit,
                 fsync_dir: Callable[[int], Any] = os.fsync) -> None:
        super().__init__()
        self.path = path
        self._write = write  # os.write and os.fsync, unless a test injects a failing disk
        self._fsync_dir = fsync_dir  # ... and the directory's fsync
        self._exit = exit  # a failed fsync under `always` stops the process (sync)
        self.policy = policy
        self.always = self.strict = policy == "always"
        self.rewrite_min_size = rewrite_min_size
        self.keyspace = keyspace
        self._fsync_timer = fsync_timer
        self._fsync = fsync
        created = not os.path.exists(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # The file's name (new, or renamed over by a compaction) must survive a power cut
        # as the records in it will: until a directory fsync says so, nothing written
        # counts as synced and writes are refused (`sync`).
        self.dir_unsynced = False
        self.write_error: OSError | None = None  # the last failed write(2), until one succeeds
        self.fsync_error: OSError | None = None  # the last failed fsync (loop or thread)
        # Either of the two while it lasts: the dispatcher refuses writes (MISCONF).
        self.failing: OSError | None = None
        if created:
            self._sync_dir()  # if it fails, `failing` says so: the commit path retries it
        self.size = os.fstat(self.fd).st_size
        self.base_size = self.size  # the size after the last compaction (or the load)
        self.buffer: list[bytes] = []  # records appended (or their parts), not yet written
        self.parts = False  # the buffer holds a big record's parts: not to be joined
        # What a failed write(2) left of them, in pieces, written first.
        self.unwritten: list[bytes | memoryview] = []
        self.appended = 0
        self.written = 0
        self.synced = 0
        self.rewrite: Rewrite | None = None
        self.rewrites = 0
        self.last_rewrite_ok = True
        self.last_rewrite_s = -1
        self._fd_lock = threading.Lock()  # the fd the everysec thread dups vs. the swap
        self._stop = threading.Event()  # the running everysec thread's
        self._thread: threading.Thread | None = None
        self.dir_lock: int | None = None  # the directory's fd, flocked while the log is open
        if policy == "everysec":
            self._start_everysec()

    def _start_everysec(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._everysec, args=(self._stop,),
                                        name="emqd-fsync", daemon=True)
        self._thread.start()

    def reconfigure(self, config: Config) -> None:
        """CONFIG SET appendfsync / auto-aof-rewrite-min-size, from the next write on.

        Leaving `everysec` tells its thread to stop without waiting for it (it may
        be in an fsync: the loop must not wait for the disk); it fsyncs a dup of
        the fd, so it finishes harmlessly. Entering `always`, the next flush
        fsyncs everything written so far, and each reply made from then on waits
        for it; a reply that waited for an fsync is released by the next flush
        under the others.
        """
        self.rewrite_min_size = config.aof_rewrite_min_size
        policy = config.appendfsync
        if policy == self.policy:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread = None
        self.policy = policy
        self.always = self.strict = policy == "always"
        if policy == "everysec":
            self._start_everysec()

    # --- the hot path ------------------------------------------------------------
    def before_apply(self, ops: list[Op]) -> None:
        """A compaction keeps the old values of what changes (persist/rewrite.py)."""
        if self.rewrite is not None:
            self.rewrite.capture(ops)

    def append(self, plan: Plan) -> None:
        """One plan's record, to be written before any reply that depends on it leaves."""
        data = record(plan)
        if type(data) is bytes:  # (not isinstance: this runs for every plan)
            self.buffer.append(data)
            self.appended += len(data)
        else:
            self._append_parts(cast(list[bytes], data))

    def append_batch(self, plans: list[Plan]) -> None:
        """Several plans as one record (an EXEC)."""
        data = batch_record(plans)
        if data:
            if isinstance(data, bytes):
                self.buffer.append(data)
                self.appended += len(data)
            else:
                self._append_parts(data)

    def _append_parts(self, parts: list[bytes]) -> None:
        """A record that holds a big value, as its parts (never joined: see above)."""
        self.buffer += parts
        self.appended += sum(map(len, parts))
        self.parts = True

    @property
    def durable(self) -> int:
        """How far a reply may rely on: written, or under `always` fsynced."""
        return self.synced if self.always else self.written

    def _errors(self, write: OSError | None, fsync: OSError | None) -> None:
        self.write_error, self.fsync_error = write, fsync
        self.failing = write or fsync

    def write(self) -> bool:
        """write(2) everything appended; False (and `write_error`) if the disk refused.

        What was not written stays buffered and is written first next time, so
        the file never misses or repeats a byte; the plans it holds are applied
        in memory, and their replies wait (emqd/commit/path.py) until it is in.
        """
        buffer = self.buffer
        if buffer:
            if self.parts:
                self.unwritten += runs(buffer)
                self.parts = False
            else:
                self.unwritten.append(buffer[0] if len(buffer) == 1 else b"".join(buffer))
            buffer.clear()
        pieces = self.unwritten
        if not pieces:
            return True
        try:
            done = _write_all(self._write, self.fd, pieces)
        except OSError as exc:
            done = exc.written if isinstance(exc, _PartialWrite) else 0
            written, self.unwritten = _split(pieces, done)
            self._wrote(written, done)
            if self.write_error is None:
                log.error("cannot write %s: %s; refusing writes until it can", self.path,
                          exc.__cause__ or exc)
            cause = exc.__cause__ if isinstance(exc, _PartialWrite) else exc
            self._errors(cause, self.fsync_error)  # type: ignore[arg-type]
            return False
        self.unwritten = []
        self._wrote(pieces, done)
        if self.write_error is not None:
            log.warning("%s is written again; accepting writes", self.path)
            self._errors(None, self.fsync_error)
        return True

    def _wrote(self, pieces: list[bytes | memoryview], size: int) -> None:
        if not size:
            return
        self.size += size
        self.written += size
        if self.rewrite is not None:
            self.rewrite.add_records(pieces)
        elif (self.size > self.rewrite_min_size and self.size > 2 * self.base_size
              and not self.unwritten):  # not from a write the disk cut short
            self.start_rewrite()

    def sync(self) -> bool:
        """fsync everything written so far (on the loop); False if the disk refused."""
        if self.dir_unsynced and not self._sync_dir():
            return False
        target = self.written
        if self.synced == target:
            if self.fsync_error is not None:  # the directory's, now done
                self._errors(self.write_error, None)
            return True
        try:
            self._timed_fsync(self.fd)
        except OSError as exc:
            if self.always:
                # What failed to reach the disk may be marked clean by the kernel, so a
                # later fsync that succeeds proves nothing for it, and `always` would
                # release replies for records that are not there: Redis exits here too.
                log.critical("cannot fsync %s under appendfsync always: %s; exiting, as "
                             "Redis does: nothing unsynced was acknowledged", self.path, exc)
                self._exit(1)
            if self.fsync_error is None:
                log.error("cannot fsync %s: %s; refusing writes until it can", self.path, exc)
            self._errors(self.write_error, exc)
            return False
        self.synced = max(self.synced, target)
        if self.fsync_error is not None:
            self._errors(self.write_error, None)
        return True

    def write_now(self) -> bool:
        """A reply that may leave before the end of the loop iteration: write(2) now."""
        return self.write()

    def flush(self) -> bool:
        """Write what is buffered and, under `always`, fsync it: True when all of it is in."""
        if not self.write():
            return False
        # After a failed fsync (SAVE, shutdown, the everysec thread), the retry's flush
        # tries it again whatever the policy: only a fsync that succeeds clears it.
        return self.sync() if self.always or self.fsync_error is not None else True

    def _everysec(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            target = self.written
            if target == self.synced:
                continue
            with self._fd_lock:
                fd = os.dup(self.fd)
            try:
                self._timed_fsync(fd)
                if self.dir_unsynced:
                    continue  # the loop's retry (sync) fsyncs the directory first
                self.synced = max(self.synced, target)
                if self.fsync_error is not None:
                    self._errors(self.write_error, None)
            except OSError as exc:
                log.error("background fsync of %s failed: %s", self.path, exc)
                self._errors(self.write_error, exc)
            finally:
                os.close(fd)

    def _sync_dir(self) -> bool:
        """fsync the log's directory: False, with writes refused, when the disk refused (and
        then `sync`, which the retry runs, tries again before anything counts as synced)."""
        try:
            _fsync_dir(os.path.dirname(self.path) or ".", self._fsync_dir)
        except OSError as exc:
            if not self.dir_unsynced:
                log.error("cannot fsync the directory of %s: %s; refusing writes until it can",
                          self.path, exc)
            self.dir_unsynced = True
            self._errors(self.write_error, exc)
            return False
        self.dir_unsynced = False
        return True

    def _timed_fsync(self, fd: int) -> None:
        """fsync, handing its duration to the fsync timer (thread-safe: /metrics)."""
        started = time.monotonic()
        self._fsync(fd)
        if self._fsync_timer is not None:
            self._fsync_timer(time.monotonic() - started)

    # --- SAVE, shutdown --------------------------------------------------------
    def save(self) -> bool:
        """Everything applied so far is on disk when this returns True (SAVE)."""
        if not (self.write() and self.sync()):
            # Outside the commit path's flush (a command, shutdown): ask for one, which
            # arms the retry; with writes refused, nothing else would.
            self.notify()
            return False
        self.last_save_s = clock.now_ms() // 1000
        return True

    def close(self) -> bool:
        """Shutdown: write and fsync (False if the disk refused); a rewrite is dropped."""
        if self.rewrite is not None:
            self.rewrite.cancel()
            self._rewrite_done(False)
        saved = self.save()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        os.close(self.fd)
        if self.dir_lock is not None:
            os.close(self.dir_lock)
        return saved

    # --- compaction ----------------------------------------------------------------
    def start_rewrite(self) -> bool:
        """Start a background compaction (none may be running); False when it cannot start.

        Not while records wait for the disk: the snapshot would hold their effects,
        and the records, written once there is room, would follow it in the new file
        (an HINCRBY counted twice on the next load).
        """
        if not self.write():  # what is logged so far belongs to the snapshot
            log.error("cannot start an AOF rewrite while %s cannot be written", self.path)
            return False
        try:
            self.rewrite = Rewrite(self.keyspace, self.path + TEMP_SUFFIX, self._swap,
                                   self.rewrite_failed)
        except OSError as exc:
            log.error("cannot start an AOF rewrite: %s", exc)
            self._rewrite_done(False)
            return False
        self.watches_applies = True
        log.info("AOF rewrite started (%d keys)", len(self.keyspace))
        return True

    def _swap(self, rewrite: Rewrite) -> None:
        """The snapshot is on disk: append the records since, fsync, rename, switch."""
        if rewrite is not self.rewrite:
            return
        if not self.write():
            rewrite.fail(self.write_error or OSError("write failed"))  # calls rewrite_failed
            return
        try:
            rewrite.write_records()
            self._fsync(rewrite.fd)
            os.rename(rewrite.temp_path, self.path)
        except OSError as exc:
            rewrite.fail(exc)  # calls rewrite_failed
            return
        with self._fd_lock:
            old, self.fd = self.fd, rewrite.fd
        os.close(old)
        # The records are in the new file, fsynced; they count once its name is durable.
        if self._sync_dir():
            self.synced = self.written
        else:
            self.notify()  # the commit path's flush arms the retry
        self.size = self.base_size = rewrite.size
        self._rewrite_done(True)
        log.info("AOF rewrite done: %d bytes in %.3fs",
                 self.size, time.monotonic() - rewrite.started)

    def _rewrite_done(self, ok: bool) -> None:
        rewrite = self.rewrite
        self.rewrite = None
        self.watches_applies = False
        self.last_rewrite_ok = ok
        if not ok:
            self.base_size = self.size  # the next automatic try waits for the file to double again
        if rewrite is not None:
            self.last_rewrite_s = int(time.monotonic() - rewrite.started)
        if ok:
            self.rewrites += 1
            self.last_save_s = clock.now_ms() // 1000

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
            "aof_last_write_status": "err" if self.failing is not None else "ok",
            "aof_current_size": self.size,
            "aof_base_size": self.base_size,
            "aof_pending_rewrite": 0,
            "aof_pending_bio_fsync": 0,
            "aof_delayed_fsync": 0,
        }


class _PartialWrite(OSError):
    """write(2) failed after `written` bytes of the data went in (the cause is the error)."""

    def __init__(self, written: int) -> None:
        super().__init__(f"only {written} bytes written")
        self.written = written


def _write_all(write: Any, fd: int, pieces: list[bytes | memoryview]) -> int:
    """write(2) the pieces in order, each from itself; the bytes written (all of them, or
    a _PartialWrite saying how many went in before the error)."""
    done = 0
    for piece in pieces:
        view = memoryview(piece)
        at = 0
        while at < len(view):
            try:
                at += write(fd, view[at:])
            except OSError as exc:
                done += at
                if not done:
                    raise
                raise _PartialWrite(done) from exc
        done += at
    return done


def _split(pieces: list[bytes | memoryview],
           done: int) -> tuple[list[bytes | memoryview], list[bytes | memoryview]]:
    """The pieces as (the `done` bytes written, the rest), cut inside a piece without a copy."""
    written: list[bytes | memoryview] = []
    for i, piece in enumerate(pieces):
        if done >= len(piece):
            written.append(piece)
            done -= len(piece)
            continue
        view = memoryview(piece)
        head = [view[:done]] if done else []
        return written + head, [view[done:], *pieces[i + 1:]]
    return written, []


def _fsync_dir(path: str, fsync: Callable[[int], Any]) -> None:
    """Make a new name or a rename in `path` durable (OSError when the disk refuses)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)
