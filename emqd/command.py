"""The shape of a command-table row, shared by `commands/` and `verbs/`; a verb's row.

Arity follows Redis: a positive number is exact, a negative one means "at
least". `flags` are Redis's command flags as COMMAND reports them (`write`,
`readonly`, `fast`, `no_auth`, ...); the dispatcher reads `write` / `no_auth`
/ `no_multi`. `keys` is (first, last, step) as COMMAND INFO lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, NoReturn

from emqd import clock, errors
from emqd.commit.plan import Block, Plan
from emqd.core import Session
from emqd.reply import Reply

# What a handler returns: a plain reply when it only read, a Plan when it writes, a
# Block when its client must wait (emqd/commit/plan.py). Plan first: mypyc checks a
# union's members in order, and the hot verbs return plans.
HandlerResult = Plan | Block | Reply
Handler = Callable[[Session, list[bytes]], HandlerResult]


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # lower case, as Redis's fullname: "hset", "emq.add"
    arity: int
    flags: frozenset[str]
    handler: Handler
    keys: tuple[int, int, int] = (0, 0, 0)
    group: str = "generic"  # COMMAND DOCS group: "hash", "sorted-set", "connection", ...
    summary: str = ""
    # Worked out once from the above, for the dispatcher's per-request checks:
    fewest: int = field(init=False)  # the arity as a range of argv lengths
    most: int = field(init=False)
    checks_disk: bool = field(init=False)  # refused while the log cannot be written
    grows: bool = field(init=False)  # Redis's `denyoom`: refused past maxmemory

    def __post_init__(self) -> None:
        exact = self.arity > 0
        object.__setattr__(self, "fewest", self.arity if exact else -self.arity)
        object.__setattr__(self, "most", self.arity if exact else 1 << 62)
        object.__setattr__(self, "checks_disk", "write" in self.flags or self.name == "ping")
        object.__setattr__(self, "grows", "denyoom" in self.flags)


def command(
    name: str,
    arity: int,
    flags: str,
    handler: Handler,
    keys: tuple[int, int, int] = (0, 0, 0),
    group: str = "generic",
    summary: str = "",
) -> Command:
    """A table row from a space-separated flag string, to keep tables readable."""
    return Command(name, arity, frozenset(flags.split()), handler, keys, group, summary)


def container(name: str, flags: str, group: str, summary: str) -> Command:
    """A container's row (CLIENT, CONFIG, ...): the dispatcher runs the row of its
    subcommand (dispatch.lookup), never this one's handler, which answers as Redis does an
    unknown subcommand should it ever be reached."""
    def handler(session: Session, argv: list[bytes]) -> NoReturn:
        raise errors.unknown_subcommand(argv[1] if len(argv) > 1 else b"", name)
    return command(name, -2, flags, handler, group=group, summary=summary)


def holder_of(session: Session) -> bytes:
    """What CLAIM and EXTEND stamp as a lease's `holder` (their `with_holder`): a named
    connection's id (a worker names itself, emqd/sessions/worker_name.py), nothing for an unnamed
    one, which pays nothing. Here, so that the planners never see a session."""
    return b"%d" % session.id if session.name else b""


def verb_command(name: str, arity: int, flags: str, verb: ModuleType, summary: str = "") -> Command:
    """A verb's row (emqd/verbs/): its handler parses, then plans against the keyspace at
    the time of the call, with this process's epoch (emqd/verbs/__init__.py)."""
    parse = verb.parse
    plan = verb.plan
    with_holder = getattr(verb, "with_holder", None)

    # The handlers return Any, not HandlerResult: `plan` is a module's attribute, so its
    # result is Any, and a compiled function declared to return a union would check
    # that value against each of the union's types on every call of a verb.
    if with_holder is None:
        def handler(session: Session, argv: list[bytes]) -> Any:
            core = session.core
            epoch = (core.run_id_bytes if core.epochs is None or len(argv) < 2
                     else core.epoch_of(argv[1]))
            return plan(parse(argv, core.config), core.keyspace, clock.now_ms(), epoch)
    else:
        def handler(session: Session, argv: list[bytes]) -> Any:
            core = session.core
            epoch = (core.run_id_bytes if core.epochs is None or len(argv) < 2
                     else core.epoch_of(argv[1]))
            return plan(with_holder(parse(argv, core.config), holder_of(session)),
                        core.keyspace, clock.now_ms(), epoch)

    handler.__name__ = name.replace(".", "_")
    return command(
        name,
        arity,
        flags,
        handler,
        (1, 1, 1) if arity != 1 else (0, 0, 0),
        group="emq",
        summary=summary,
    )
