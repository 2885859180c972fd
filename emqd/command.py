"""The shape of a command-table row, shared by `commands/` and `verbs/`.

Arity follows Redis: a positive number is exact, a negative one means "at
least". `flags` are Redis's command flags as COMMAND reports them (`write`,
`readonly`, `fast`, `no_auth`, ...); the dispatcher reads `write` / `no_auth`
/ `no_multi`. `keys` is (first, last, step) as COMMAND INFO lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emqd.session import Session

Handler = Callable[[Session, list[bytes]], Any]


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # lower case, as Redis's fullname: "hset", "emq.add"
    arity: int
    flags: frozenset[str]
    handler: Handler
    keys: tuple[int, int, int] = (0, 0, 0)
    group: str = "generic"  # COMMAND DOCS group: "hash", "sorted-set", "connection", ...
    summary: str = ""


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
