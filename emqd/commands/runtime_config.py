"""CONFIG GET, SET, RESETSTAT, REWRITE and HELP, as Redis 7.0 answers them.

The parameters, what each shows and which can change, are a table apart
(emqd/commands/parameters.py). CONFIG SET is all or nothing, as in Redis 7:
every name is checked first (unknown, cannot change, given twice: the first
fault in argument order is the error), then every value is read, and only
when all are good does one `Core.reconfigure` apply them together. A
change lasts until the process ends: the flags and `EMQD_*` variables are the
configuration, so REWRITE answers Redis's error for a server without a file.
"""

from __future__ import annotations

from emqd import errors
from emqd.command import command, container
from emqd.commands import helps
from emqd.commands.parameters import BY_NAME, PARAMETERS, BadValue, Changes, Parameter
from emqd.compat.glob import compile_pattern
from emqd.core import Session
from emqd.reply import Reply
from emqd.serve import fd_limit


def config_get(session: Session, argv: list[bytes]) -> Reply:
    """CONFIG GET parameter ...: a name without a glob character is answered under the
    name as typed, a pattern under each matching name; each parameter once (names
    compare without case), as Redis does."""
    config = session.core.config
    found: dict[str, tuple[bytes, Parameter]] = {}  # lower-case name -> (shown as, parameter)
    for asked in argv[2:]:
        if not any(c in asked for c in b"*?["):
            parameter = BY_NAME.get(asked.lower())
            if parameter is not None:
                found.setdefault(parameter.name, (asked, parameter))
            continue
        matches = compile_pattern(asked.lower())
        for parameter in PARAMETERS:
            if parameter.name not in found and matches(parameter.name.encode()):
                found[parameter.name] = (parameter.name.encode(), parameter)
    return {shown: parameter.show(config).encode() for shown, parameter in found.values()}


def config_set(session: Session, argv: list[bytes]) -> Reply:
    """CONFIG SET parameter value [parameter value ...] -> OK, every pair applied, or none."""
    if len(argv) % 2:
        raise errors.SYNTAX()
    chosen: list[tuple[Parameter, bytes]] = []
    for i in range(2, len(argv), 2):
        name = argv[i]
        parameter = BY_NAME.get(name.lower())
        if parameter is None:
            raise errors.unknown_config_option(name)
        if parameter.read is None:
            reason = "can't set protected config" if parameter.protected else \
                "can't set immutable config"
            raise errors.config_set_failed(name, reason)
        if any(parameter is earlier for earlier, _ in chosen):
            raise errors.config_set_failed(name, "duplicate parameter")
        chosen.append((parameter, argv[i + 1]))
    changes: Changes = {}
    for parameter, value in chosen:
        assert parameter.read is not None
        try:
            changes.update(parameter.read(value))
        except BadValue as bad:
            raise errors.config_set_failed(parameter.name.encode(), bad.reason) from None
    maxclients = changes.get("maxclients")
    if maxclients is not None:  # as Redis: the descriptors must hold them (emqd/serve/fd_limit.py)
        most = fd_limit.make_room(maxclients, session.core.config)
        if most is not None:
            raise errors.config_set_failed(
                b"maxclients", "The operating system is not able to handle the specified "
                f"number of clients, try with {most}")
    session.core.reconfigure(changes)
    return "OK"


def config_resetstat(session: Session, argv: list[bytes]) -> Reply:
    session.core.stats.reset()
    return "OK"


def config_rewrite(session: Session, argv: list[bytes]) -> Reply:
    raise errors.NO_CONFIG_FILE()


def config_help(session: Session, argv: list[bytes]) -> Reply:
    return helps.help_reply("CONFIG", helps.CONFIG)


_SRV = "server"
COMMANDS = [
    container("config", "", _SRV,
              "A container for server configuration commands."),
]

_ADMIN = "admin noscript loading stale"
SUBCOMMANDS = {
    "config": [
        command("config|get", -3, _ADMIN, config_get, group=_SRV,
                summary="Returns the effective values of configuration parameters."),
        command("config|set", -4, _ADMIN, config_set, group=_SRV,
                summary="Sets configuration parameters in-flight."),
        command("config|resetstat", 2, _ADMIN, config_resetstat, group=_SRV,
                summary="Resets the server's statistics."),
        command("config|rewrite", 2, _ADMIN, config_rewrite, group=_SRV,
                summary="Persists the effective configuration to file."),
        command("config|help", 2, "loading stale", config_help, group=_SRV,
                summary="Returns helpful text about the different subcommands."),
    ],
}
