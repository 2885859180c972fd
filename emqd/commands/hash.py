"""Hash commands: HSET, HGET, HGETALL (the rest of section 7 to come)."""

from __future__ import annotations

from typing import Any

from emqd import errors
from emqd.command import command
from emqd.plan import Plan
from emqd.session import Session


def hset(session: Session, argv: list[bytes]) -> Any:
    if len(argv) % 2:
        raise errors.wrong_arity("hset")
    row = session.server.keyspace.hash(argv[1]) or {}
    fresh = {argv[i] for i in range(2, len(argv), 2) if argv[i] not in row}
    return Plan([(b"HSET", *argv[1:])], len(fresh))


def hget(session: Session, argv: list[bytes]) -> Any:
    row = session.server.keyspace.hash(argv[1])
    return None if row is None else row.get(argv[2])


def hgetall(session: Session, argv: list[bytes]) -> Any:
    return dict(session.server.keyspace.hash(argv[1]) or {})


COMMANDS = [
    command("hset", -4, "write denyoom fast", hset, (1, 1, 1), group="hash"),
    command("hget", 3, "readonly fast", hget, (1, 1, 1), group="hash"),
    command("hgetall", 2, "readonly", hgetall, (1, 1, 1), group="hash"),
]
