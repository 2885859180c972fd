"""FUNCTION and FCALL, answered as a Redis 7.0 that has no functions loaded.

emqd runs no Lua, but clients and tools send these: a migration tool DUMPs
and RESTOREs the functions, a test suite calls FUNCTION FLUSH between tests,
a dashboard lists them. So LIST is empty, FLUSH is OK, STATS shows the Lua
engine with nothing in it, DUMP gives Redis's payload of an empty library
set (which RESTORE takes back), DELETE and FCALL find nothing, KILL has
nothing to kill. Loading code is the one thing refused (`NO_FUNCTIONS`),
after Redis's own checks of the arguments. Replies and errors are Redis's.
"""

from __future__ import annotations

from emqd import errors
from emqd.command import command, container
from emqd.commands import helps
from emqd.core import Session
from emqd.reply import Reply

# FUNCTION DUMP of no libraries: RDB version 10 (little-endian), then the CRC64
# of those two bytes, as Redis 7.0 writes it.
EMPTY_DUMP = b"\x0a\x00\x5d\x9b\x5c\x40\x0f\x7f\xa2\xda"
RDB_VERSION = 10
_RESTORE_POLICIES = (b"flush", b"append", b"replace")


def function_help(session: Session, argv: list[bytes]) -> Reply:
    return helps.help_reply("FUNCTION", helps.FUNCTION)


def function_list(session: Session, argv: list[bytes]) -> Reply:
    """FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]: each option once, then nothing."""
    with_code = library_name = False
    i = 2
    while i < len(argv):
        option = argv[i].lower()
        if not with_code and option == b"withcode":
            with_code = True
        elif not library_name and option == b"libraryname":
            if i == len(argv) - 1:
                raise errors.LIBRARY_NAME_MISSING()
            library_name = True
            i += 1
        else:
            raise errors.unknown_argument(argv[i])
        i += 1
    return []


def function_flush(session: Session, argv: list[bytes]) -> Reply:
    """FUNCTION FLUSH [ASYNC|SYNC]: there is nothing to delete, and nothing to log."""
    if len(argv) > 3:
        raise errors.subcommand_syntax(argv[1], "function")
    if len(argv) == 3 and argv[2].lower() not in (b"async", b"sync"):
        raise errors.FLUSH_MODE()
    return "OK"


def function_stats(session: Session, argv: list[bytes]) -> Reply:
    return {
        b"running_script": None,
        b"engines": {b"LUA": {b"libraries_count": 0, b"functions_count": 0}},
    }


def function_dump(session: Session, argv: list[bytes]) -> Reply:
    return EMPTY_DUMP


def function_restore(session: Session, argv: list[bytes]) -> Reply:
    """FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]: an empty dump restores nothing.

    A payload too short or from a newer RDB version gets Redis's refusal; one
    that may hold libraries is refused, as emqd cannot run them (its checksum
    is not verified: either way nothing is restored).
    """
    if len(argv) > 4:
        raise errors.subcommand_syntax(argv[1], "function")
    if len(argv) == 4 and argv[3].lower() not in _RESTORE_POLICIES:
        raise errors.RESTORE_POLICY()
    payload = argv[2]
    if len(payload) < 10 or int.from_bytes(payload[-10:-8], "little") > RDB_VERSION:
        raise errors.DUMP_PAYLOAD()
    if payload != EMPTY_DUMP:
        raise errors.NO_FUNCTIONS()
    return "OK"


def function_load(session: Session, argv: list[bytes]) -> Reply:
    """FUNCTION LOAD [REPLACE] code: Redis's option and metadata checks, then refused."""
    for option in argv[2:-1]:
        if option.lower() != b"replace":
            raise errors.unknown_option_given(option)
    if not argv[-1].startswith(b"#!"):
        raise errors.LIBRARY_METADATA_MISSING()
    raise errors.NO_FUNCTIONS()


def function_delete(session: Session, argv: list[bytes]) -> Reply:
    raise errors.LIBRARY_NOT_FOUND()


def function_kill(session: Session, argv: list[bytes]) -> Reply:
    raise errors.NOTBUSY()


def fcall(session: Session, argv: list[bytes]) -> Reply:
    """FCALL / FCALL_RO function numkeys ...: Redis looks the function up first."""
    raise errors.FUNCTION_NOT_FOUND()


_GROUP = "scripting"
COMMANDS = [
    container("function", "", _GROUP,
              "A container for function commands"),
    command("fcall", -3, "noscript stale skip_monitor no_mandatory_keys movablekeys", fcall,
            group=_GROUP, summary="Invoke a function"),
    command("fcall_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys movablekeys",
            fcall, group=_GROUP, summary="Invoke a read-only function"),
]

SUBCOMMANDS = {
    "function": [
        command("function|load", -3, "write denyoom noscript", function_load, group=_GROUP,
                summary="Create a function with the given arguments (name, code, description)"),
        command("function|restore", -3, "write denyoom noscript", function_restore,
                group=_GROUP, summary="Restore all the functions on the given payload"),
        command("function|flush", -2, "write noscript", function_flush, group=_GROUP,
                summary="Deleting all functions"),
        command("function|kill", 2, "noscript allow_busy", function_kill, group=_GROUP,
                summary="Kill the function currently in execution."),
        command("function|delete", 3, "write noscript", function_delete, group=_GROUP,
                summary="Delete a function by name"),
        command("function|stats", 2, "noscript allow_busy", function_stats, group=_GROUP,
                summary="Return information about the function currently running (name, "
                        "description, duration)"),
        command("function|help", 2, "loading stale", function_help, group=_GROUP,
                summary="Show helpful text about the different subcommands"),
        command("function|dump", 2, "noscript", function_dump, group=_GROUP,
                summary="Dump all functions into a serialized binary payload"),
        command("function|list", -2, "noscript", function_list, group=_GROUP,
                summary="List information about all the functions"),
    ],
}
