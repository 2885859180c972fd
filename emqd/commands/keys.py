"""Key commands: DEL, EXISTS, TYPE, DBSIZE, FLUSHALL."""

from __future__ import annotations

from typing import Any

from emqd.command import command
from emqd.plan import Plan
from emqd.session import Session


def del_(session: Session, argv: list[bytes]) -> Any:
    data = session.server.keyspace.data
    present = [key for key in dict.fromkeys(argv[1:]) if key in data]
    return Plan([(b"DEL", *present)] if present else [], len(present))


def exists(session: Session, argv: list[bytes]) -> Any:
    data = session.server.keyspace.data
    return sum(1 for key in argv[1:] if key in data)


def type_(session: Session, argv: list[bytes]) -> Any:
    return session.server.keyspace.type_name(argv[1])


def dbsize(session: Session, argv: list[bytes]) -> Any:
    return len(session.server.keyspace)


def flushall(session: Session, argv: list[bytes]) -> Any:
    return Plan([(b"FLUSHALL",)], "OK")


COMMANDS = [
    command("del", -2, "write", del_, (1, -1, 1), group="generic"),
    command("exists", -2, "readonly fast", exists, (1, -1, 1), group="generic"),
    command("type", 2, "readonly fast", type_, (1, 1, 1), group="generic"),
    command("dbsize", 1, "readonly fast", dbsize, group="server"),
    command("flushall", -1, "write", flushall, group="server"),
]
