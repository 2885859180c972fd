"""`emqd --check-aof FILE [--fix]`: what a start would make of an append-only file, and
the cut that lets a damaged one load (redis-check-aof's job, in emqd's terms).

The check loads the file as a start would (persist/load.py, into a scratch
keyspace, so a command the keyspace refuses is found too) and says:

- clean: every byte is a complete record (exit status 0);
- a torn last record (a crash mid-write): a start drops it by itself, keeping
  a copy of the bytes it cuts (exit status 0);
- damaged: a start refuses (exit status 1). The report names the byte where
  the damage starts, the record that holds it, and what a cut at that
  record's start would drop: bytes, and the complete records found after it.

`--fix` makes that cut, after copying the whole file beside it
(`FILE.orig-<UTC time>`, fsynced), so that nothing it drops is lost; it
refuses while an emqd holds the file's directory. A file that cannot be read
exits with status 2.

`cut` is also what a start uses to drop a torn tail (persist/aof.py): it keeps
the bytes it cuts in `FILE.torn-<UTC time>` first. Nothing in this package
cuts or rewrites a file that holds records it would drop without such a copy.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass

from emqd.persist.dirlock import lock_dir
from emqd.persist.load import LoadError, complete_records, load
from emqd.store.keyspace import Keyspace

CLEAN = 0
DAMAGED = 1
UNREADABLE = 2


@dataclass(frozen=True, slots=True)
class Examined:
    """What a start would make of the file."""

    size: int
    keep: int  # the bytes a start (or a cut) keeps: `size` when clean
    damage: LoadError | None  # None: clean or torn
    records_dropped: int  # complete records in the bytes after `keep`


def examine(path: str) -> Examined:
    """Load `path` as a start would, into a scratch keyspace; raises OSError if unreadable."""
    size = os.stat(path).st_size
    try:
        loaded = load(path, Keyspace())
    except LoadError as damage:
        return Examined(size, damage.record, damage, complete_records(path, damage.record))
    return Examined(size, loaded.size, None, 0)


def cut(path: str, at: int, whole_copy: bool) -> str:
    """Cut `path` at byte `at`, after keeping a copy: of the whole file (`whole_copy`, as
    --fix does) or of the bytes cut (a start's torn tail). Returns the copy's path."""
    copy = _new_path(path, "orig" if whole_copy else "torn")
    with open(path, "r+b") as source:
        with open(copy, "xb") as target:
            if whole_copy:
                shutil.copyfileobj(source, target)
            else:
                source.seek(at)
                shutil.copyfileobj(source, target)
            target.flush()
            os.fsync(target.fileno())
        _fsync_dir(os.path.dirname(os.path.abspath(path)))
        source.truncate(at)
        os.fsync(source.fileno())
    return copy


def _new_path(path: str, kind: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = f"{path}.{kind}-{stamp}"
    n = 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{path}.{kind}-{stamp}-{n}"
    return candidate


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def report(path: str, found: Examined) -> list[str]:
    """The lines the check prints."""
    lines = [f"{path}: {found.size} bytes"]
    dropped = found.size - found.keep
    if found.damage is not None:
        damage = found.damage
        lines += [
            f"damaged at byte offset {damage.offset}: {damage.reason}",
            f"the damaged record starts at byte offset {damage.record}; a start refuses the file",
            f"a cut at byte offset {found.keep} keeps {found.keep} bytes and drops {dropped} "
            f"bytes: the damaged record and {found.records_dropped} complete "
            f"record{'' if found.records_dropped == 1 else 's'} after it",
        ]
    elif dropped:
        lines.append(f"a torn last record: {dropped} bytes at byte offset {found.keep} "
                     "(a crash mid-write); a start drops it, keeping a copy of those bytes")
    else:
        lines.append("clean: every byte is a complete record")
    return lines


def main(path: str, fix: bool) -> int:
    """The `emqd --check-aof FILE [--fix]` command: prints the report; the exit status."""
    try:
        found = examine(path)
    except OSError as error:
        print(f"{path}: cannot read it: {error}", file=sys.stderr)
        return UNREADABLE
    for line in report(path, found):
        print(line)
    if found.keep == found.size:
        return CLEAN
    if not fix:
        if found.damage is not None:
            print(f"to cut it there, keeping a copy of the whole file: "
                  f"emqd --check-aof {path} --fix")
            return DAMAGED
        return CLEAN
    try:
        lock = lock_dir(os.path.dirname(os.path.abspath(path)))  # no emqd may be using it
    except OSError as error:
        print(f"not cut: {error}", file=sys.stderr)
        return UNREADABLE
    try:
        copy = cut(path, found.keep, whole_copy=True)
    except OSError as error:
        print(f"not cut: {error}", file=sys.stderr)
        return UNREADABLE
    finally:
        if lock is not None:
            os.close(lock)
    print(f"cut at byte offset {found.keep}; the whole file as it was is kept in {copy}")
    return CLEAN
