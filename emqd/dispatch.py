"""The command table and the one path every request takes.

`execute(session, argv)` looks the name up, checks arity generically, checks
auth, queues inside MULTI, runs the handler, and commits a returned `Plan`
through `ServerState.commit` (apply + log as one record). Handlers never see a
command with the wrong number of arguments, and never write to the store or
the socket themselves.
"""

from __future__ import annotations

from typing import Any

from emqd import errors
from emqd.command import Command, command
from emqd.commands import ALL as COMMAND_MODULES
from emqd.errors import ReplyError
from emqd.plan import Block, Plan
from emqd.session import Session
from emqd.verbs import ALL as VERB_MODULES


def _build_table() -> dict[bytes, Command]:
    table: dict[bytes, Command] = {}
    for module in (*COMMAND_MODULES, *VERB_MODULES):
        for row in module.COMMANDS:
            key = row.name.encode()
            if key in table:
                raise RuntimeError(f"command {row.name} defined twice")
            table[key] = row
    for row in TRANSACTIONS:
        table[row.name.encode()] = row
    return table


# --- MULTI / EXEC / DISCARD: the dispatcher's own, as they run other commands --
def _multi(session: Session, argv: list[bytes]) -> Any:
    if session.multi is not None:
        raise errors.MULTI_NESTED
    session.multi = []
    session.multi_error = False
    return "OK"


def _exec(session: Session, argv: list[bytes]) -> Any:
    queued = session.multi
    if queued is None:
        raise errors.EXEC_WITHOUT_MULTI
    aborted = session.multi_error
    session.multi = None
    session.multi_error = False
    if aborted:
        raise errors.EXECABORT
    server = session.server
    replies: list[Any] = []
    session.in_exec = True
    server.begin_batch()
    try:
        for request in queued:
            replies.append(_run(session, TABLE[request[0].lower()], request))
    finally:
        server.end_batch()
        session.in_exec = False
    return replies


def _discard(session: Session, argv: list[bytes]) -> Any:
    if session.multi is None:
        raise errors.DISCARD_WITHOUT_MULTI
    session.multi = None
    session.multi_error = False
    return "OK"


TRANSACTIONS = [
    command("multi", 1, "noscript loading stale fast allow_busy", _multi, group="transactions"),
    command("exec", 1, "noscript loading stale skip_slowlog", _exec, group="transactions"),
    command("discard", 1, "noscript loading stale fast allow_busy", _discard, group="transactions"),
]
_IN_MULTI_DIRECT = frozenset({b"exec", b"discard", b"multi", b"quit", b"reset"})

TABLE: dict[bytes, Command] = _build_table()


def execute(session: Session, argv: list[bytes]) -> Any:
    """Run one request; the reply value, or a `Block` for a parked client."""
    name = argv[0].lower()
    row = TABLE.get(name)
    server = session.server
    server.total_commands += 1
    if row is None:
        error = errors.unknown_command(argv)
        if session.multi is not None:
            session.multi_error = True
        return error
    arity = row.arity
    if (arity > 0 and len(argv) != arity) or len(argv) < -arity:
        if session.multi is not None:
            session.multi_error = True
        return errors.wrong_arity(row.name)
    if not session.authenticated and "no_auth" not in row.flags:
        if session.multi is not None:
            session.multi_error = True
        return errors.NOAUTH
    if session.multi is not None and name not in _IN_MULTI_DIRECT:
        if "no_multi" in row.flags:
            session.multi_error = True
            return ReplyError(f"ERR Command not allowed inside a transaction")
        session.multi.append(argv)
        return "QUEUED"
    return _run(session, row, argv)


def _run(session: Session, row: Command, argv: list[bytes]) -> Any:
    try:
        result = row.handler(session, argv)
    except ReplyError as error:
        return error
    kind = type(result)
    if kind is Plan:
        session.server.commit(result.ops)
        return result.reply
    if kind is Block:
        if result.plan is not None:
            session.server.commit(result.plan.ops)
        if session.in_exec:
            return result.timeout_reply
        return result
    return result
