"""Server commands: COMMAND, INFO, TIME, SHUTDOWN.

(SAVE, LASTSAVE and BGREWRITEAOF are in emqd/commands/persistence.py; CONFIG in
emqd/commands/runtime_config.py.)

COMMAND's replies are generated from the command table's rows (arity, flags,
keys, group, summary), and DOCS adds each command's arguments from their own
table (emqd/commands/docs.py), from which redis-cli builds its hints. INFO's
sections are built here from the `Core` (the sink adds its own fields to
`persistence`); other parts add fields through `Core.add_info` (the server its
`blocked_clients`).
"""

from __future__ import annotations

import os
import platform
import resource
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

from emqd import __version__, clock, core_build, errors
from emqd.command import Command, command
from emqd.commands import memory
from emqd.commands.connection import REDIS_VERSION
from emqd.commands.docs import ARGUMENTS
from emqd.compat.glob import compile_pattern
from emqd.core import Core, Session
from emqd.reply import Raw, Reply, Set, Verbatim

# --- COMMAND -------------------------------------------------------------------------
_SRV = "server"
Table = dict[bytes, Command]
Subtables = dict[bytes, dict[bytes, Command]]


def _categories(row: Command) -> list[str]:
    flags = row.flags
    cats = {"@fast" if "fast" in flags else "@slow"}
    if "write" in flags:
        cats.add("@write")
    if "readonly" in flags:
        cats.add("@read")
    if "admin" in flags:
        cats |= {"@admin", "@dangerous"}
    if "pubsub" in flags:  # from the flag: PUBSUB HELP is in the group but not in @pubsub
        cats.add("@pubsub")
    if "blocking" in flags:
        cats.add("@blocking")
    group = _GROUP_CATEGORY.get(row.group)
    if group:
        cats.add(group)
    return sorted(cats, key=_CATEGORY_ORDER.index)


# The order Redis 7.0 lists them in (its ACL category bits; its command flag bits).
_CATEGORY_ORDER = (
    "@keyspace", "@read", "@write", "@set", "@sortedset", "@list", "@hash", "@string",
    "@bitmap", "@hyperloglog", "@geo", "@stream", "@pubsub", "@admin", "@fast", "@slow",
    "@blocking", "@dangerous", "@connection", "@transaction", "@scripting",
)
_FLAG_ORDER = (
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
    "loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth",
    "no_mandatory_keys", "no_async_loading", "no_multi", "movablekeys", "allow_busy",
)


_GROUP_CATEGORY = {
    "generic": "@keyspace",
    "hash": "@hash",
    "sorted-set": "@sortedset",
    "connection": "@connection",
    "transactions": "@transaction",
    "scripting": "@scripting",
}


# Where numkeys stands in a command whose keys it counts (`movablekeys`): after the
# fixed keys, or after BZMPOP's timeout.
_NUMKEYS_AT: Final = {"bzmpop": 2}
# Commands whose keys Redis describes one spec each (a destination, then a source).
_SPEC_PER_KEY: Final = frozenset({"zrangestore"})


def _range_spec(flags: list[str], first: int, lastkey: int, step: int) -> dict[bytes, Any]:
    return {
        b"flags": Set(flags),
        b"begin_search": {b"type": b"index", b"spec": {b"index": first}},
        b"find_keys": {
            b"type": b"range",
            b"spec": {b"lastkey": lastkey, b"keystep": step, b"limit": 0},
        },
    }


def _key_specs(row: Command) -> list[Any]:
    first, last, step = row.keys
    specs: list[Any] = []
    flags = ["RW" if "write" in row.flags else "RO", "access"]
    if first and row.name in _SPEC_PER_KEY:
        specs += [_range_spec(flags, key, 0, step) for key in range(first, last + 1, step)]
    elif first:
        specs.append(_range_spec(flags, first, last - first if last >= 0 else last, step))
    if "movablekeys" in row.flags:  # numkeys, then that many keys
        at = _NUMKEYS_AT.get(row.name, last + 1)
        specs.append({
            b"flags": Set(["RO", "access"] if first else flags),
            b"begin_search": {b"type": b"index", b"spec": {b"index": at}},
            b"find_keys": {
                b"type": b"keynum",
                b"spec": {b"keynumidx": 0, b"firstkey": 1, b"keystep": 1},
            },
        })
    return specs


def _listed_flags(row: Command) -> list[str]:
    """In Redis's order; Redis never lists `sentinel`, and 7.0 no longer has `random`."""
    return sorted(row.flags & set(_FLAG_ORDER), key=_FLAG_ORDER.index)


def command_info(row: Command, subtables: Subtables) -> list[Any]:
    """One COMMAND INFO entry, in Redis 7.0's ten-field shape.

    Under RESP3 Redis sends the tips and key specs as sets, and the
    subcommands as a set too when there are none (an array otherwise).
    """
    subs = subtables.get(row.name.encode(), {})
    return [
        row.name.encode(),
        row.arity,
        Set(_listed_flags(row)),
        *row.keys,
        Set(_categories(row)),
        Set([]),
        Set(_key_specs(row)),
        [command_info(sub, subtables) for sub in subs.values()] if subs else Set([]),
    ]


def command_docs(row: Command, subtables: Subtables) -> dict[Any, Any]:
    docs: dict[Any, Any] = {b"summary": row.summary.encode(), b"group": row.group.encode()}
    arguments = ARGUMENTS.get(row.name)
    if arguments is not None:
        docs[b"arguments"] = arguments
    subs = subtables.get(row.name.encode())
    if subs:
        docs[b"subcommands"] = {sub.name.encode(): command_docs(sub, subtables)
                                for sub in subs.values()}
    return docs


def _rows(names: Iterable[bytes], table: Table, subtables: Subtables) -> list[Command | None]:
    rows: list[Command | None] = []
    for name in names:
        container, _, sub = name.lower().partition(b"|")
        row = table.get(container)
        if row is not None and sub:
            row = subtables.get(container, {}).get(sub)
        rows.append(row)
    return rows


def command_family(tables: Callable[[], tuple[Table, Subtables]]) -> tuple[Command, list[Command]]:
    """COMMAND's row and its subcommands' rows, answering from the tables `tables()`
    returns when asked: the dispatcher's, which hold these rows too. It passes the
    callable in as it builds them, so this module does not import the dispatcher."""

    def command_(session: Session, argv: list[bytes]) -> Reply:
        table, subtables = tables()
        return [command_info(row, subtables) for row in table.values()]

    def command_count(session: Session, argv: list[bytes]) -> Reply:
        return len(tables()[0])

    def command_list(session: Session, argv: list[bytes]) -> Reply:
        """COMMAND LIST [FILTERBY PATTERN p]: every name, subcommands included."""
        table, subtables = tables()
        names = [name for name in table]
        for subs in subtables.values():
            names += [row.name.encode() for row in subs.values()]
        if len(argv) == 2:
            return names
        if len(argv) == 5 and argv[2].lower() == b"filterby" and argv[3].lower() == b"pattern":
            matches = compile_pattern(argv[4])
            return [name for name in names if matches(name)]
        raise errors.SYNTAX()

    def command_info_(session: Session, argv: list[bytes]) -> Reply:
        if len(argv) == 2:
            return command_(session, argv)
        table, subtables = tables()
        return [None if row is None else command_info(row, subtables)
                for row in _rows(argv[2:], table, subtables)]

    def command_docs_(session: Session, argv: list[bytes]) -> Reply:
        table, subtables = tables()
        if len(argv) == 2:
            return {name: command_docs(row, subtables) for name, row in table.items()}
        return {row.name.encode(): command_docs(row, subtables)
                for row in _rows(argv[2:], table, subtables) if row is not None}

    return (
        command("command", -1, "loading stale", command_, group=_SRV,
                summary="Returns detailed information about all commands."),
        [
            command("command|count", 2, "loading stale", command_count, group=_SRV,
                    summary="Returns a count of commands."),
            command("command|list", -2, "loading stale", command_list, group=_SRV,
                    summary="Returns a list of command names."),
            command("command|info", -2, "loading stale", command_info_, group=_SRV,
                    summary="Returns information about one, multiple or all commands."),
            command("command|docs", -2, "loading stale", command_docs_, group=_SRV,
                    summary="Returns documentary information about one, multiple or all "
                            "commands."),
        ],
    )


# --- INFO ----------------------------------------------------------------------------
DEFAULT_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication", "cpu", "modules",
    "errorstats", "cluster", "keyspace",
)
_TITLES = {"cpu": "CPU"}  # the others are capitalized


def info_section(core: Core, name: str, now_ms: int) -> dict[str, object]:
    """The fields of one section, emqd's own then those added through `Core.add_info`."""
    stats = core.stats
    uptime = (now_ms - core.started_ms) // 1000
    fields: dict[str, object]
    if name == "server":
        fields = {
            "redis_version": REDIS_VERSION,
            "redis_git_sha1": "00000000",
            "redis_git_dirty": 0,
            "redis_build_id": "0",
            "redis_mode": "standalone",
            "os": f"{platform.system()} {platform.release()} {platform.machine()}",
            "arch_bits": 64 if sys.maxsize > 2**32 else 32,
            "multiplexing_api": "uvloop",
            "process_id": os.getpid(),
            "process_supervised": "no",
            "run_id": core.run_id,
            "tcp_port": core.config.port,
            "server_time_usec": now_ms * 1000,
            "uptime_in_seconds": uptime,
            "uptime_in_days": uptime // 86400,
            "hz": 10,
            "configured_hz": 10,
            "executable": sys.argv[0],
            "config_file": "",
            "io_threads_active": 0,
            "emqd_version": __version__,
            "emqd_core": core_build(),
        }
    elif name == "clients":
        fields = {
            "connected_clients": len(core.clients),
            "cluster_connections": 0,
            "maxclients": core.config.maxclients,
            "client_recent_max_input_buffer": 0,
            "client_recent_max_output_buffer": 0,
            "blocked_clients": 0,
            "tracking_clients": 0,
            "clients_in_timeout_table": 0,
        }
    elif name == "memory":
        fields = memory.info_fields(core)
    elif name == "persistence":
        fields = {
            "loading": 0,
            "async_loading": 0,
            "rdb_changes_since_last_save": core.commit.dirty,
            "rdb_bgsave_in_progress": 0,
            "rdb_last_save_time": core.sink.last_save_s,
            "rdb_last_bgsave_status": "ok",
            "aof_enabled": int(core.config.appendonly),
            "aof_rewrite_in_progress": 0,
            "aof_rewrite_scheduled": 0,
            "aof_last_bgrewrite_status": "ok",
            "aof_last_write_status": "ok",
            **core.sink.info(),
        }
    elif name == "stats":
        fields = {
            "total_connections_received": stats.total_connections,
            "total_commands_processed": stats.total_commands,
            "instantaneous_ops_per_sec": 0,
            "rejected_connections": stats.rejected_connections,
            "expired_keys": 0,
            "evicted_keys": 0,
            "keyspace_hits": 0,
            "keyspace_misses": 0,
            "pubsub_channels": len(core.pubsub.channels),
            "pubsub_patterns": len(core.pubsub.patterns),
            "pubsubshard_channels": 0,  # emqd has no sharded Pub/Sub
            **stats.loop_lag.info(),
            "client_output_buffer_limit_disconnections": stats.output_limit_disconnections,
            **stats.housekeeping.info(),
            **stats.auth_failures.info(),
        }
    elif name == "replication":
        fields = {
            "role": "master",
            "connected_slaves": 0,
            "master_failover_state": "no-failover",
            "master_replid": core.run_id,
            "master_repl_offset": 0,
        }
    elif name == "cpu":
        usage = resource.getrusage(resource.RUSAGE_SELF)
        fields = {"used_cpu_sys": f"{usage.ru_stime:.6f}", "used_cpu_user": f"{usage.ru_utime:.6f}"}
    elif name == "cluster":
        fields = {"cluster_enabled": 0}
    elif name == "keyspace":
        keys = len(core.keyspace)
        fields = {"db0": f"keys={keys},expires=0,avg_ttl=0"} if keys else {}
    else:  # modules, errorstats: present and empty, as in a plain Redis
        fields = {}
    for extra in core.info.get(name, ()):
        fields.update(extra())
    return fields


def info(session: Session, argv: list[bytes]) -> Reply:
    """INFO [section ...]: `all`/`everything` and `default` as in Redis; unknown ones are empty."""
    asked = [arg.decode("latin-1").lower() for arg in argv[1:]] or ["default"]
    names: list[str] = []
    for name in asked:
        group = DEFAULT_SECTIONS if name in ("default", "all", "everything") else (name,)
        names += [n for n in group if n in DEFAULT_SECTIONS and n not in names]
    now = clock.now_ms()
    core = session.core
    text = "\r\n".join(
        f"# {_TITLES.get(name, name.capitalize())}\r\n"
        + "".join(f"{key}:{value}\r\n" for key, value in info_section(core, name, now).items())
        for name in names
    )
    return Verbatim(text.encode())


# --- time and life -----------------------------------------------------------
def time_(session: Session, argv: list[bytes]) -> Reply:
    now = clock.now_ms()
    return [b"%d" % (now // 1000), b"%d" % (now % 1000 * 1000)]


_SHUTDOWN_FLAGS = {b"nosave", b"save", b"now", b"force", b"abort"}


def shutdown(session: Session, argv: list[bytes]) -> Reply:
    """SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: no reply; the server stops (server.py).

    emqd's shutdown is immediate, so there is never one in progress to ABORT.
    """
    flags = {arg.lower() for arg in argv[1:]}
    if not flags <= _SHUTDOWN_FLAGS or {b"nosave", b"save"} <= flags or (
        b"abort" in flags and len(flags) > 1
    ):
        raise errors.SYNTAX()
    if b"abort" in flags:
        raise errors.NO_SHUTDOWN_IN_PROGRESS()
    session.core.request_shutdown()
    session.close_after_reply = True
    return Raw(b"")


COMMANDS = [  # and COMMAND, from command_family (the dispatcher adds it)
    command("info", -1, "loading stale sentinel", info, group=_SRV,
            summary="Returns information and statistics about the server."),
    command("time", 1, "loading stale fast", time_, group=_SRV, summary="Returns the server time."),
    command("shutdown", -1, "admin noscript loading stale no_multi sentinel allow_busy", shutdown,
            group=_SRV,
            summary="Synchronously saves the database(s) to disk and shuts down the server."),
]

