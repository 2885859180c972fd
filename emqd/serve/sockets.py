"""The listening sockets, plain and TLS, bound before the log is loaded.

`bind_listeners(config)` builds the TLS context (a bad certificate is named)
and binds every port the config asks for, so that a busy port or a missing
key file is reported at once, naming what failed, and not after a log that
may take minutes to load. The sockets start listening only in `listen()`,
once the keyspace is loaded, so no client connects to a half-loaded server.
TLS follows Redis's options (`--tls-port`, `--tls-cert-file`, `--tls-key-file`,
`--tls-ca-cert-file`, `--tls-auth-clients yes|no|optional`); `--port 0` turns
the plain port off.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from emqd.config import Config

BACKLOG = 511  # Redis's tcp-backlog default

# --tls-auth-clients -> what the server asks of a client's certificate.
_VERIFY_MODES = {
    "yes": ssl.CERT_REQUIRED,
    "optional": ssl.CERT_OPTIONAL,
    "no": ssl.CERT_NONE,
}


@dataclass(frozen=True, slots=True)
class BoundSocket:
    """One bound socket; `ssl` is None for the plain port."""

    sock: socket.socket
    flag: str  # the option that asked for it, for messages: "--port", "--tls-port"
    ssl: ssl.SSLContext | None

    @property
    def address(self) -> str:
        return format_address(*self.sock.getsockname()[:2])


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tls_context(config: Config) -> ssl.SSLContext:
    """The server's TLS context from the config's files; an unreadable file is named."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Redis's tls-protocols default
    try:
        context.load_cert_chain(config.tls_cert_file or "", config.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(f"cannot load --tls-cert-file {config.tls_cert_file} with "
                      f"--tls-key-file {config.tls_key_file}: {_reason(exc)}") from None
    if config.tls_ca_cert_file:
        try:
            context.load_verify_locations(cafile=config.tls_ca_cert_file)
        except (OSError, ssl.SSLError) as exc:
            raise OSError(f"cannot load --tls-ca-cert-file {config.tls_ca_cert_file}: "
                          f"{_reason(exc)}") from None
    context.verify_mode = _VERIFY_MODES[config.tls_auth_clients]
    return context


def bind_listeners(config: Config) -> list[BoundSocket]:
    """Every socket the config asks for, bound (not yet listening); OSError names
    the address and port that could not be bound."""
    wanted: list[tuple[str, int, ssl.SSLContext | None]] = []
    if config.port:
        wanted.append(("--port", config.port, None))
    if config.tls_port:
        wanted.append(("--tls-port", config.tls_port, tls_context(config)))
    listeners: list[BoundSocket] = []
    try:
        for flag, port, context in wanted:
            listeners.append(BoundSocket(_bound_socket(config.bind, port, flag), flag, context))
    except OSError:
        close(listeners)
        raise
    return listeners


def bind_http(config: Config) -> socket.socket | None:
    """The dashboard's socket (--http-port), bound before the log loads like the RESP
    ports, so that a taken port is named with its flag; None when the port is 0."""
    if not config.http_port:
        return None
    return _bound_socket(config.bind, config.http_port, "--http-port")


def listen(listener: BoundSocket) -> None:
    try:
        listener.sock.listen(BACKLOG)
    except OSError as exc:  # another process bound it too and listened first
        raise OSError(f"cannot listen on {listener.address} ({listener.flag}): "
                      f"{_reason(exc)}") from None


def close(listeners: list[BoundSocket]) -> None:
    for listener in listeners:
        listener.sock.close()


def _bound_socket(bind: str, port: int, flag: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {format_address(bind, port)} ({flag}): "
                      f"{_reason(exc)}") from None
    sock.setblocking(False)
    return sock


def _reason(exc: BaseException) -> str:
    """The OS's words without the errno prefix: `Address already in use`."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return getattr(exc, "strerror", None) or str(exc)
