"""Connection commands: PING, ECHO, QUIT, RESET, SELECT, AUTH, HELLO, CLIENT.

They read and change the `Session` only (protocol version, name, auth; RESET
also leaves its Pub/Sub channels), never the keyspace. Replies and errors are
Redis 7.0's, except `CLIENT SETINFO`, which Redis 7.2 added (redis-py sends it
on connect) and emqd answers as 7.2 does.
"""

from __future__ import annotations

import hmac
from typing import Final

from emqd import clock, errors
from emqd.command import command, container
from emqd.commands import helps
from emqd.compat.numbers import parse_int
from emqd.core import Session
from emqd.reply import Reply, Verbatim


def ping(session: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2:
        raise errors.wrong_arity("ping")
    if session.pubsub is not None and session.resp == 2:  # subscribed mode: a 2-array
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return argv[1] if len(argv) == 2 else "PONG"


def echo(session: Session, argv: list[bytes]) -> Reply:
    return argv[1]


def quit_(session: Session, argv: list[bytes]) -> Reply:
    session.close_after_reply = True
    return "OK"


def reset(session: Session, argv: list[bytes]) -> Reply:
    """Back to a fresh connection's state: RESP2, no name, no MULTI, no channels, logged out."""
    session.core.pubsub.leave(session)
    session.reset()
    return "RESET"


def select(session: Session, argv: list[bytes]) -> Reply:
    index = parse_int(argv[1])
    if index is None:
        raise errors.NOT_INTEGER()
    if not -(2**31) <= index < 2**31:
        raise errors.NOT_INT32()
    if index != 0:
        raise errors.DB_OUT_OF_RANGE()
    return "OK"


def check_password(session: Session, username: bytes | None, password: bytes) -> None:
    """Authenticate `session` as Redis's default user, or raise Redis's refusal (counted
    and logged: emqd/serve/auth_failures.py)."""
    required = session.core.config.requirepass
    if not required:
        if username is None:
            raise errors.AUTH_NOT_CONFIGURED()
        if username == b"default":  # the default user has `nopass`: any password
            session.authenticated = True
            return
    elif username in (None, b"default") and hmac.compare_digest(password, required.encode()):
        session.authenticated = True
        return
    session.core.stats.auth_failures.refused("client " + session.addr)
    raise errors.WRONGPASS()


def auth(session: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise errors.SYNTAX()
    if len(argv) == 3:
        check_password(session, argv[1], argv[2])
    else:
        check_password(session, None, argv[1])
    return "OK"


def hello(session: Session, argv: list[bytes]) -> Reply:
    """HELLO [protover [AUTH username password] [SETNAME clientname]]

    The reply is a map in the protocol just chosen (the connection encodes
    it after the switch, as Redis does).
    """
    resp = session.resp
    if len(argv) > 1:
        version = parse_int(argv[1])
        if version is None:
            raise errors.BAD_PROTOCOL_VERSION()
        if version not in (2, 3):
            raise errors.NOPROTO()
        resp = version
    name = None
    i = 2
    while i < len(argv):
        option = argv[i].lower()
        more = len(argv) - i - 1
        if option == b"auth" and more >= 2:
            check_password(session, argv[i + 1], argv[i + 2])
            i += 3
        elif option == b"setname" and more >= 1:
            name = _valid_name(argv[i + 1])
            i += 2
        else:
            raise errors.hello_syntax(argv[i])
    if not session.authenticated:
        raise errors.HELLO_NOAUTH()
    if name is not None:
        session.name = name
    session.resp = resp
    return {
        b"server": b"redis",
        b"version": REDIS_VERSION.encode(),
        b"proto": resp,
        b"id": session.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


REDIS_VERSION: Final = "7.0.15"  # what HELLO and INFO claim: the Redis that emqd answers like


# --- CLIENT -------------------------------------------------------------------------
def _printable(value: bytes) -> bool:
    """Every byte in '!'..'~': no space, newline, control or non-ASCII byte, so that a
    CLIENT LIST line still splits on spaces into its fields (Redis's rule)."""
    return not any(c < 33 or c > 126 for c in value)


def _valid_name(name: bytes) -> bytes:
    """Redis refuses names with bytes outside '!'..'~' (spaces, newlines, controls)."""
    if not _printable(name):
        raise errors.BAD_CLIENT_NAME()
    return name


def client_help(session: Session, argv: list[bytes]) -> Reply:
    return helps.help_reply("CLIENT", helps.CLIENT)


def client_id(session: Session, argv: list[bytes]) -> Reply:
    return session.id


def client_getname(session: Session, argv: list[bytes]) -> Reply:
    return session.name or None


def client_setname(session: Session, argv: list[bytes]) -> Reply:
    session.name = _valid_name(argv[2])
    return "OK"


def client_setinfo(session: Session, argv: list[bytes]) -> Reply:
    """CLIENT SETINFO LIB-NAME|LIB-VER value: kept for CLIENT LIST, as Redis 7.2 keeps it.

    Redis 7.2 (clientSetinfoCommand) reads the value as a C string: every byte
    up to its first NUL must be in '!'..'~', or the attribute is refused with
    its name as typed, and CLIENT LIST shows it up to that NUL; so the value is
    kept up to there, and no value can add a field or a line to CLIENT LIST.
    """
    attr = argv[2]
    kind = attr.lower()
    if kind != b"lib-name" and kind != b"lib-ver":
        raise errors.ReplyError(b"ERR Unrecognized option '" + attr + b"'")
    value = argv[3].partition(b"\0")[0]
    if not _printable(value):
        raise errors.ReplyError(
            b"ERR " + attr + b" cannot contain spaces, newlines or special characters.")
    if kind == b"lib-name":
        session.lib_name = value
    else:
        session.lib_ver = value
    return "OK"


def client_info(session: Session, argv: list[bytes]) -> Reply:
    return Verbatim(client_line(session, clock.now_ms()) + b"\n")


def client_list(session: Session, argv: list[bytes]) -> Reply:
    """CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...]"""
    clients = list(session.core.clients.values())
    i = 2
    if i < len(argv) and argv[i].lower() == b"type" and len(argv) == 4:
        kind = argv[3].lower()
        if kind not in (b"normal", b"master", b"replica", b"slave", b"pubsub"):
            raise errors.unknown_client_type(argv[3])
        if kind in (b"normal", b"pubsub"):  # a client listening to anything is of type pubsub
            clients = [c for c in clients if (c.pubsub is not None) == (kind == b"pubsub")]
        else:
            clients = []
    elif i < len(argv) and argv[i].lower() == b"id" and len(argv) > 3:
        wanted = set()
        for raw in argv[3:]:
            number = parse_int(raw)
            if number is None:
                raise errors.INVALID_CLIENT_ID()
            wanted.add(number)
        clients = [c for c in clients if c.id in wanted]
    elif len(argv) > 2:
        raise errors.SYNTAX()
    now = clock.now_ms()
    return Verbatim(b"".join(client_line(c, now) + b"\n" for c in clients))


def client_line(session: Session, now_ms: int) -> bytes:
    """One CLIENT LIST line, with Redis 7.0's fields (buffer sizes are emqd's estimates)."""
    subs = session.pubsub
    flags = ("P" if subs is not None else "") + ("x" if session.multi is not None else "")
    fields = (
        ("id", session.id),
        ("addr", session.addr),
        ("laddr", session.laddr),
        ("fd", -1),
        ("name", session.name.decode("latin-1")),
        ("age", (now_ms - session.created_ms) // 1000),
        ("idle", (now_ms - session.last_ms) // 1000),
        ("flags", flags or "N"),
        ("db", 0),
        ("sub", len(subs.channels) if subs is not None else 0),
        ("psub", len(subs.patterns) if subs is not None else 0),
        ("ssub", 0),
        ("multi", -1 if session.multi is None else len(session.multi)),
        ("qbuf", 0),
        ("qbuf-free", 0),
        ("argv-mem", 0),
        ("multi-mem", 0),
        ("rbs", 0),
        ("rbp", 0),
        ("obl", 0),
        ("oll", 0),
        ("omem", 0),
        ("tot-mem", 0),
        ("events", "r"),
        ("cmd", session.last_command),
        ("user", "default"),
        ("redir", -1),
        ("resp", session.resp),
    )
    line = " ".join(f"{key}={value}" for key, value in fields).encode("latin-1")
    if session.lib_name or session.lib_ver:
        line += b" lib-name=" + session.lib_name + b" lib-ver=" + session.lib_ver
    return line


_CONN: Final = "connection"
COMMANDS: Final = [
    command("ping", -1, "fast sentinel", ping, group=_CONN,
            summary="Returns the server's liveliness response."),
    command("echo", 2, "loading stale fast", echo, group=_CONN,
            summary="Returns the given string."),
    command("quit", -1, "allow_busy noscript loading stale fast no_auth", quit_, group=_CONN,
            summary="Closes the connection."),
    command("reset", 1, "noscript loading stale fast no_auth allow_busy", reset, group=_CONN,
            summary="Resets the connection."),
    command("select", 2, "loading stale fast", select, group=_CONN,
            summary="Changes the selected database."),
    command("auth", -2, "noscript loading stale fast no_auth sentinel allow_busy", auth,
            group=_CONN, summary="Authenticates the connection."),
    command("hello", -1, "noscript loading stale fast no_auth sentinel allow_busy", hello,
            group=_CONN, summary="Handshakes with the Redis server."),
    container("client", "sentinel", _CONN,
              "A container for client connection commands."),
]

SUBCOMMANDS: Final = {
    "client": [
        command("client|id", 2, "noscript loading stale", client_id, group=_CONN,
                summary="Returns the unique client ID of the connection."),
        command("client|getname", 2, "noscript loading stale", client_getname, group=_CONN,
                summary="Returns the name of the connection."),
        command("client|setname", 3, "noscript loading stale", client_setname, group=_CONN,
                summary="Sets the connection name."),
        command("client|setinfo", 4, "noscript loading stale", client_setinfo, group=_CONN,
                summary="Sets information specific to the client or connection."),
        command("client|info", 2, "noscript loading stale", client_info, group=_CONN,
                summary="Returns information about the connection."),
        command("client|list", -2, "admin noscript loading stale", client_list, group=_CONN,
                summary="Lists open connections."),
        command("client|help", 2, "loading stale", client_help, group=_CONN,
                summary="Returns helpful text about the different subcommands."),
    ],
}
