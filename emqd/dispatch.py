"""The command table and the one path every request takes.

`execute(session, argv)` looks the name up (and the subcommand of a container
such as CLIENT or CONFIG), checks arity generically, checks auth, queues
inside MULTI, runs the handler, and commits a returned `Plan`
through the commit path (emqd/commit/path.py: applied, then kept as one record).
Handlers never see a command with the wrong number of arguments, and never write to the store or
the socket themselves.

The checks run in Redis 7.0's order (processCommand): unknown command or
subcommand, arity, NOAUTH, not-allowed-in-MULTI, subscribed mode, then
queueing. (The last two are tested the other way round, and cannot both
apply: a RESP2 client in subscribed mode cannot open a MULTI.) Each refusal
before EXEC marks an open transaction, so its EXEC answers EXECABORT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from emqd import errors
from emqd.command import Command, command
from emqd.commands import (
    connection,
    expiry,
    fronts,
    function,
    keys,
    memory,
    persistence,
    pubsub,
    random_members,
    runtime_config,
    server,
    zset,
    zset_algebra,
    zset_pops,
)
from emqd.commands import hash as hash_commands
from emqd.commands.pubsub import subscribed_mode_refusal
from emqd.commit.plan import Block, Plan
from emqd.core import Session
from emqd.errors import ReplyError
from emqd.reply import Raw
from emqd.serve.server_stats import Tally
from emqd.verbs import (
    add,
    beat,
    cancel,
    children,
    claim,
    complete,
    epoch,
    extend,
    fail,
    flow,
    get,
    lane_limit,
    lane_list,
    lane_rate,
    log,
    logs,
    metrics,
    pause,
    progress,
    promote,
    queue_config,
    queues,
    rate,
    remove,
    repeat,
    repeat_del,
    repeats,
    requeue,
    resume,
    revive,
    stalled_check,
    stats,
    wait,
    worker_order,
)
from emqd.wire.resp import encode

COMMAND_MODULES: Final = (connection, keys, expiry, hash_commands, zset, zset_algebra, zset_pops,
                          random_members, pubsub, server, runtime_config, function, persistence,
                          fronts, memory)
VERB_MODULES: Final = (
    add, epoch, get, stats, queues, pause, resume, queue_config, claim, complete, fail, requeue,
    extend, stalled_check, promote, revive, remove, lane_limit, lane_list, progress, log, logs,
    wait, flow, children, repeat, repeat_del, repeats, rate, lane_rate, cancel, worker_order,
    beat, metrics)


# COMMAND answers from the tables it is in: its rows are made with a way to reach them.
_COMMAND, _COMMAND_SUBS = server.command_family(lambda: (TABLE, SUBTABLES))


def _build_table() -> dict[bytes, Command]:
    table: dict[bytes, Command] = {}
    for module in (*COMMAND_MODULES, *VERB_MODULES):
        rows = [_COMMAND, *server.COMMANDS] if module is server else module.COMMANDS
        for row in rows:
            key = row.name.encode()
            if key in table:
                raise RuntimeError(f"command {row.name} defined twice")
            table[key] = row
    for row in TRANSACTIONS:
        table[row.name.encode()] = row
    return table


def _build_subtables() -> dict[bytes, dict[bytes, Command]]:
    """Container -> its subcommands' rows (named `client|setname`, as Redis names them)."""
    subtables: dict[bytes, dict[bytes, Command]] = {}
    for module in COMMAND_MODULES:
        families = getattr(module, "SUBCOMMANDS", {}).items()
        if module is server:
            families = [*families, ("command", _COMMAND_SUBS)]
        for container, rows in families:
            subtables[container.encode()] = {
                row.name.split("|", 1)[1].encode(): row for row in rows
            }
    return subtables


# --- MULTI / EXEC / DISCARD: the dispatcher's own, as they run other commands --
def _multi(session: Session, argv: list[bytes]) -> str:
    if session.multi is not None:
        raise errors.MULTI_NESTED()
    session.multi = []
    session.multi_error = False
    return "OK"


def _exec(session: Session, argv: list[bytes]) -> list[Any] | Raw:
    queued = session.multi
    if queued is None:
        raise errors.EXEC_WITHOUT_MULTI()
    aborted = session.multi_error
    session.multi = None
    session.multi_error = False
    if aborted:
        raise errors.EXECABORT()
    commit = session.core.commit
    replies: list[Any] = []
    protocols: list[int] = []  # the protocol each reply is written in
    session.in_exec = True
    commit.begin_batch()
    try:
        for request in queued:
            row = cast(Command, lookup(request))  # a request is queued once its row is found
            replies.append(_run(session, row, request))
            protocols.append(session.resp)
    finally:
        mark = commit.end_batch()
        session.in_exec = False
        if mark:
            session.log_mark = session.tells = mark
    if any(resp != session.resp for resp in protocols):
        # A HELLO inside switched protocol: like Redis, each reply is in the
        # protocol of its moment, under an array header (the same in both).
        body = b"".join(encode(r, resp) for r, resp in zip(replies, protocols, strict=True))
        return Raw(b"*%d\r\n" % len(replies) + body)
    return replies


def _discard(session: Session, argv: list[bytes]) -> str:
    if session.multi is None:
        raise errors.DISCARD_WITHOUT_MULTI()
    session.multi = None
    session.multi_error = False
    return "OK"


TRANSACTIONS: Final = [
    command("multi", 1, "noscript loading stale fast allow_busy", _multi, group="transactions"),
    command("exec", 1, "noscript loading stale skip_slowlog", _exec, group="transactions"),
    command("discard", 1, "noscript loading stale fast allow_busy", _discard, group="transactions"),
]
_IN_MULTI_DIRECT: Final = frozenset({"exec", "discard", "multi", "quit", "reset"})

TABLE: Final[dict[bytes, Command]] = _build_table()
SUBTABLES: Final[dict[bytes, dict[bytes, Command]]] = _build_subtables()
# Every request pays for its name lookup, and clients send names in lower or
# upper case (redis-py and redis-benchmark: upper). Both spellings map
# straight to the row, so only mixed case pays for `bytes.lower()`; and the
# subtable is found through the row's name, only for the few containers.
_BY_SPELLING: Final[dict[bytes, Command]] = {
    spelling: row for name, row in TABLE.items() for spelling in (name, name.upper())
}
_SUBTABLE_OF: Final[dict[str, dict[bytes, Command]]] = {
    TABLE[name].name: subtable for name, subtable in SUBTABLES.items()
}
# The rows `execute` takes without `lookup`: every command but the containers, by
# the spellings above; a mixed case, a container, or a wrong arity goes the long way.
_DIRECT: Final[dict[bytes, Command]] = {
    spelling: row for spelling, row in _BY_SPELLING.items() if row.name not in _SUBTABLE_OF
}


def lookup(argv: list[bytes]) -> Command | ReplyError:
    """The row for a request (a subcommand's row for a container), or Redis's refusal."""
    row = _BY_SPELLING.get(argv[0])
    if row is None:
        row = TABLE.get(argv[0].lower())
        if row is None:
            return errors.unknown_command(argv)
    if len(argv) > 1:
        subtable = _SUBTABLE_OF.get(row.name)
        if subtable is not None:
            sub = subtable.get(argv[1].lower())
            if sub is None:
                return errors.unknown_subcommand(argv[1], row.name)
            row = sub
    arity = row.arity
    if (arity > 0 and len(argv) != arity) or len(argv) < -arity:
        return errors.wrong_arity(row.name)
    return row


def execute(session: Session, argv: list[bytes]) -> Any:
    """Run one request; the reply value, or a `Block` for a parked client.

    Every request pays for what is here, so the common case (a known command
    in a usual spelling, with the right number of arguments, from a client in
    no special mode) is a few attribute tests; the rest goes the long way.
    """
    core = session.core
    stats = core.stats
    stats.total_commands += 1
    direct = _DIRECT.get(argv[0])
    if direct is not None and direct.fewest <= len(argv) <= direct.most:
        row = direct
    else:
        found = lookup(argv)
        if isinstance(found, ReplyError):
            return _reject(session, found, argv)
        row = found
    name = session.last_command = row.name
    tally = stats.command_calls.get(name)
    if tally is None:
        tally = stats.command_calls[name] = Tally()
    tally.n += 1
    if not session.authenticated or session.multi is not None or session.pubsub is not None:
        return _special(session, row, argv)
    if row.grows and core.maxmemory and core.out_of_memory():
        return _reject(session, errors.OOM(), argv)
    # Redis's rule: while the log cannot be written, refuse what would change the
    # keyspace (and PING, so that a client notices); _special applies it inside MULTI.
    if row.checks_disk:
        failing = core.commit.sink.failing
        if failing is not None:
            return _reject(session, errors.misconf(failing), argv)
    router = core.router
    if router is not None:  # a router, if any, decides first: here, elsewhere, or refused
        routed = router.route(session, row, argv)
        if routed is not None:
            return routed
    return _run(session, row, argv)


def _memory_refuses(session: Session, row: Command) -> bool:
    """Redis's rule past maxmemory: refuse what adds data, an EXEC whose queue does, and,
    inside MULTI, any command to queue but EXEC, DISCARD, QUIT and RESET (a queue of
    requests grows too)."""
    if not session.core.out_of_memory():
        return False
    if row.grows:
        return True
    if session.multi is None:
        return False
    if row.name == "exec":
        return any(isinstance(found, Command) and found.grows
                   for found in map(lookup, session.multi))
    return row.name not in _IN_MULTI_DIRECT or row.name == "multi"


def _exec_writes(session: Session, row: Command) -> bool:
    """An EXEC whose queue holds a write: Redis refuses it as it refuses the write
    (processCommand's is_write_command), and the transaction is discarded."""
    if row.name != "exec" or session.multi is None:
        return False
    for request in session.multi:
        found = lookup(request)
        if isinstance(found, Command) and "write" in found.flags:
            return True
    return False


def _special(session: Session, row: Command, argv: list[bytes]) -> Any:
    """A client that owes its password, is inside MULTI, or listens to channels: Redis
    7.0's checks in processCommand's order (NOAUTH, MISCONF, Pub/Sub mode, MULTI)."""
    if not session.authenticated and "no_auth" not in row.flags:
        return _reject(session, errors.NOAUTH(), argv)
    if session.core.maxmemory and _memory_refuses(session, row):
        return _reject(session, errors.OOM(), argv)
    failing = session.core.commit.sink.failing
    if failing is not None and (row.checks_disk or _exec_writes(session, row)):
        return _reject(session, errors.misconf(failing), argv)
    if session.pubsub is not None:  # a Pub/Sub client: RESP2 allows it only a few commands
        refusal = subscribed_mode_refusal(session, row)
        if refusal is not None:
            return _reject(session, refusal, argv)
    if session.multi is not None and row.name not in _IN_MULTI_DIRECT:
        if "no_multi" in row.flags:
            return _reject(session, errors.NOT_IN_MULTI(), argv)
        session.multi.append(argv)
        return "QUEUED"
    router = session.core.router
    if router is not None and row.name == "exec":  # the router may refuse what EXEC runs
        refusal = router.route(session, row, argv)
        if isinstance(refusal, ReplyError):
            return _reject(session, refusal, argv)
    return _run(session, row, argv)


def _reject(session: Session, error: ReplyError, argv: list[bytes]) -> ReplyError:
    """A refusal before the command runs; inside MULTI it dooms the EXEC.

    A refused EXEC itself discards the transaction and says why, as Redis's
    execCommandAbort does.
    """
    if argv[0].lower() == b"exec":
        session.multi = None
        session.multi_error = False
        return errors.exec_abort(error)
    if session.multi is not None:
        session.multi_error = True
    return error


def _commit(session: Session, plan: Plan) -> None:
    """Apply and keep a plan; its client's replies now wait for that record (commit/path.py)."""
    mark = session.core.commit.apply(plan)
    if mark:
        session.log_mark = session.tells = mark


def _run(session: Session, row: Command, argv: list[bytes]) -> Any:
    try:
        # Called as returning Any: the result's type is tested below, once; called as a
        # Handler (a union), compiled code would check it against the union first.
        handler: Callable[[Session, list[bytes]], Any] = row.handler
        result = handler(session, argv)
        kind = type(result)
        if kind is Plan:
            plan: Plan = result  # typed: compiled code reads its fields natively
            _commit(session, plan)  # (a sink may refuse it, before anything is applied)
            return plan.reply
        if kind is Block:
            block: Block = result
            if block.plan is not None:
                _commit(session, block.plan)
            if session.in_exec:
                return block.timeout_reply
            return block
        return result
    except ReplyError as error:
        # The reply needs only the text: dropping the traceback frees the frames
        # it holds (and their argv, a 100 MB payload) as soon as it is sent.
        return error.with_traceback(None)
