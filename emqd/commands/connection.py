"""Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO."""

from __future__ import annotations

import hmac
from typing import Any

from emqd import errors
from emqd.command import command
from emqd.session import Session


def ping(session: Session, argv: list[bytes]) -> Any:
    if len(argv) > 2:
        raise errors.wrong_arity("ping")
    return argv[1] if len(argv) == 2 else "PONG"


def echo(session: Session, argv: list[bytes]) -> Any:
    return argv[1]


def quit_(session: Session, argv: list[bytes]) -> Any:
    session.close_after_reply = True
    return "OK"


def select(session: Session, argv: list[bytes]) -> Any:
    if argv[1] != b"0":
        raise errors.DB_OUT_OF_RANGE
    return "OK"


def check_password(session: Session, username: bytes | None, password: bytes) -> None:
    """Authenticate `session`, or raise Redis's WRONGPASS / its AUTH-without-password error."""
    required = session.server.config.requirepass
    if not required:
        if username is None:
            raise errors.ReplyError(
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?"
            )
        if username == b"default":
            session.authenticated = True
            return
        raise errors.WRONGPASS
    if (username in (None, b"default")) and hmac.compare_digest(password, required.encode()):
        session.authenticated = True
        return
    raise errors.WRONGPASS


def auth(session: Session, argv: list[bytes]) -> Any:
    if len(argv) > 3:
        raise errors.SYNTAX
    if len(argv) == 3:
        check_password(session, argv[1], argv[2])
    else:
        check_password(session, None, argv[1])
    return "OK"


def hello(session: Session, argv: list[bytes]) -> Any:
    resp = session.resp
    i = 1
    if len(argv) > 1:
        try:
            resp = int(argv[1])
        except ValueError:
            raise errors.ReplyError("ERR Protocol version is not an integer or out of range")
        if resp not in (2, 3):
            raise errors.ReplyError("NOPROTO unsupported protocol version")
        i = 2
    name = None
    while i < len(argv):
        option = argv[i].lower()
        more = len(argv) - i - 1
        if option == b"auth" and more >= 2:
            check_password(session, argv[i + 1], argv[i + 2])
            i += 3
        elif option == b"setname" and more >= 1:
            name = argv[i + 1]
            i += 2
        else:
            raise errors.ReplyError(b"ERR Syntax error in HELLO option '" + argv[i] + b"'")
    if not session.authenticated:
        raise errors.ReplyError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
            "select the RESP protocol version at the same time"
        )
    if name is not None:
        session.name = name
    session.resp = resp
    from emqd import __version__

    return {
        b"server": b"redis",
        b"version": b"7.0.15",
        b"proto": resp,
        b"id": session.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
        b"emqd": __version__.encode(),
    }


COMMANDS = [
    command("ping", -1, "fast sentinel", ping, group="connection"),
    command("echo", 2, "fast", echo, group="connection"),
    command("quit", -1, "allow_busy noscript loading stale fast no_auth", quit_, group="connection"),
    command("select", 2, "loading stale fast", select, group="connection"),
    command("auth", -2, "noscript loading stale fast no_auth sentinel allow_busy", auth,
            group="connection"),
    command("hello", -1, "noscript loading stale fast no_auth sentinel allow_busy", hello,
            group="connection"),
]
