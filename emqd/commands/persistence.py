"""BGREWRITEAOF, SAVE, LASTSAVE: the persistence commands, on the commit path's sink.

With `--appendonly no` there is nothing to save to: BGREWRITEAOF and SAVE
answer an error rather than pretend. Neither runs inside MULTI. SAVE does not rewrite: it writes and
fsyncs the log, so everything applied so far survives a power cut.
"""

from __future__ import annotations

from emqd import errors
from emqd.command import command
from emqd.core import Session
from emqd.persist.aof import AppendOnlyFile
from emqd.reply import Reply


def bgrewriteaof(session: Session, argv: list[bytes]) -> Reply:
    aof = session.core.commit.sink
    if not isinstance(aof, AppendOnlyFile):
        raise errors.AOF_DISABLED()
    if aof.rewrite is not None:
        raise errors.REWRITE_IN_PROGRESS()
    if not aof.start_rewrite():
        raise errors.REWRITE_FAILED()
    return "Background append only file rewriting started"


def save(session: Session, argv: list[bytes]) -> Reply:
    commit = session.core.commit
    if not isinstance(commit.sink, AppendOnlyFile):  # (a cluster's nodes keep their own)
        raise errors.AOF_DISABLED()
    if not commit.save():
        raise errors.save_failed(commit.sink.failing)
    return "OK"


def lastsave(session: Session, argv: list[bytes]) -> Reply:
    return session.core.commit.sink.last_save_s


COMMANDS = [
    # Not inside MULTI: the transaction's earlier plans are applied but logged
    # only at EXEC, so the snapshot and the records after it would both hold them.
    command("bgrewriteaof", 1, "admin noscript no_async_loading no_multi", bgrewriteaof,
            group="server"),
    command("save", 1, "admin noscript no_async_loading no_multi", save, group="server"),
    command("lastsave", 1, "random fast allow_busy", lastsave, group="server"),
]
