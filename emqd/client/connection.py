"""One pipelining RESP connection of the Worker: requests out as one write, replies
parsed by hiredis straight from `data_received`, matched to their requests in order.

redis-py spends tens of microseconds on each command it sends (its profile is in
docs/PERFORMANCE.md, "The worker"), more than the server spends on the job, so
the Worker speaks RESP itself on connections of its own. A batch of requests is
one `write`; its replies come back as one list, error replies as exception
values (`errors.reply_error`: StaleJob, AuthenticationError, ... as redis-py
names them), never raised; a lost connection fails every batch still waiting
with redis-py's `ConnectionError`, which the Worker rides out (TRANSPORT_ERRORS).

Where the connection goes, and how it logs in, is what the queue's redis-py pool
would use (`Endpoint.of`): host and port or a Unix socket, TLS with redis-py's
own context, the username, password and database, so a Worker reaches exactly
the server its Queue does. The handshake (AUTH, SELECT, CLIENT SETNAME, CLIENT
SETINFO) is one pipelined round trip.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import hiredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from emqd import __version__
from emqd.client import request
from emqd.client.errors import reply_error

CONNECT_TIMEOUT_S = 10.0


def encode(argv: tuple[bytes | str | int, ...] | list[Any]) -> bytes:
    """One request (an Operation's argv) as RESP bytes."""
    return request.encode(*argv)


@dataclass(frozen=True)
class Endpoint:
    """Where to connect and how to log in: what the queue's redis-py pool would use."""

    host: str = "127.0.0.1"
    port: int = 6390
    path: str | None = None  # a Unix socket
    tls: ssl.SSLContext | None = None
    username: str | None = None
    password: str | None = None
    db: int = 0
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    tls_arguments: dict[str, Any] | None = None  # redis-py's ssl_* (the lease keeper's TLS)

    @classmethod
    def of(cls, pool: Any) -> Endpoint:
        """From a redis-py (asyncio) ConnectionPool: its connection class and arguments."""
        kwargs = dict(pool.connection_kwargs)
        tls = tls_arguments = None
        if any(key.startswith("ssl") for key in kwargs) or "SSL" in pool.connection_class.__name__:
            # redis-py's own TLS context for these arguments (certificates, checks).
            tls = pool.connection_class(**kwargs).ssl_context.get()
            tls_arguments = {key: value for key, value in kwargs.items()
                             if key.startswith("ssl") and isinstance(value, str | int | bool)}
        return cls(host=kwargs.get("host") or "127.0.0.1", port=int(kwargs.get("port") or 6379),
                   path=kwargs.get("path"), tls=tls, username=kwargs.get("username"),
                   password=kwargs.get("password"), db=int(kwargs.get("db") or 0),
                   connect_timeout_s=kwargs.get("socket_connect_timeout") or CONNECT_TIMEOUT_S,
                   tls_arguments=tls_arguments)

    def settings(self) -> dict[str, Any]:
        """What the lease keeper (emqd/client/lease_keeper.py) needs to reach the same server."""
        return {"host": self.host, "port": self.port, "path": self.path,
                "username": self.username, "password": self.password, "db": self.db,
                "tls": self.tls_arguments}

    def login(self, name: str) -> list[tuple[bytes | str | int, ...]]:
        """The handshake's requests: AUTH (when a password is set), SELECT (a database
        other than 0), CLIENT SETNAME, and emqd as CLIENT SETINFO's library."""
        requests: list[tuple[bytes | str | int, ...]] = []
        if self.password is not None:
            requests.append(("AUTH", self.username, self.password) if self.username
                            else ("AUTH", self.password))
        if self.db:
            requests.append(("SELECT", self.db))
        requests.append(("CLIENT", "SETNAME", name))
        requests.append(("CLIENT", "SETINFO", "LIB-NAME", "emqd"))
        requests.append(("CLIENT", "SETINFO", "LIB-VER", __version__))
        requests.append(("CLIENT", "ID"))  # the `holder` its CLAIMs and EXTENDs write
        return requests


class Replies(asyncio.Protocol):
    """A pipelining connection's protocol: each batch of requests waits, in order, for as
    many replies, parsed by hiredis as they arrive. An error reply is a value of
    `error_class` (hiredis builds it from the reply's text), passed through `translate`
    when one is given; a lost connection fails every batch still waiting."""

    def __init__(self, error_class: type[Exception] = ResponseError,
                 translate: Callable[[Any], Exception] | None = None) -> None:
        self.reader = hiredis.Reader(replyError=error_class)
        self.error_class, self.translate = error_class, translate
        # Each batch waiting for its replies: (future, how many, the replies so far).
        self.waiting: deque[tuple[asyncio.Future[list[Any]], int, list[Any]]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None  # redis-py's ConnectionError, mostly

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream's: it can write

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        gets, waiting = self.reader.gets, self.waiting
        translate, error_class = self.translate, self.error_class
        while True:
            try:
                reply = gets()
            except hiredis.ProtocolError as error:
                self._fail(RedisConnectionError(f"protocol error from the server: {error}"))
                return
            if reply is False:
                return
            if not waiting:
                self._fail(RedisConnectionError("a reply nobody asked for"))
                return
            future, count, replies = waiting[0]
            if translate is not None and type(reply) is error_class:
                reply = translate(reply)
            replies.append(reply)
            if len(replies) == count:
                waiting.popleft()
                if not future.done():
                    future.set_result(replies)

    def connection_lost(self, exc: BaseException | None) -> None:
        # (uvloop passes what a callback raised, a KeyboardInterrupt included.)
        if exc is not None and not isinstance(exc, Exception):
            self._fail(exc)  # a KeyboardInterrupt raised in a callback: it must go on up
            return
        reason = f": {exc}" if exc is not None else ""
        self._fail(RedisConnectionError(f"connection to the server lost{reason}"))

    def _fail(self, error: BaseException) -> None:
        if self.lost is None:
            self.lost = error
        if self.transport is not None:
            self.transport.close()
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(self.lost)




class Connection:
    """One connection; `send(requests)` writes encoded requests as one batch and
    returns the future of their replies, in order."""

    def __init__(self, protocol: Replies) -> None:
        self._protocol = protocol
        self.client_id = 0  # CLIENT ID, once logged in

    @classmethod
    async def open(cls, endpoint: Endpoint, name: str,
                   translate: Callable[[Any], Exception] = reply_error) -> Connection:
        """Connect and log in; raises redis-py's ConnectionError (or TimeoutError) when
        the server cannot be reached, AuthenticationError when it refuses the password.
        Error replies become `translate(error)`: by default what redis-py and the client
        name them (StaleJob, ...)."""
        loop = asyncio.get_running_loop()

        def protocol_factory() -> Replies:
            return Replies(ResponseError, translate)

        try:
            if endpoint.path is not None:
                connecting = loop.create_unix_connection(protocol_factory, endpoint.path,
                                                         ssl=endpoint.tls)
            else:
                connecting = loop.create_connection(
                    protocol_factory, endpoint.host, endpoint.port, ssl=endpoint.tls,
                    server_hostname=endpoint.host if endpoint.tls else None)
            _, protocol = await asyncio.wait_for(connecting, endpoint.connect_timeout_s)
        except (OSError, TimeoutError) as error:
            raise RedisConnectionError(f"cannot connect to the server: "
                                       f"{type(error).__name__}: {error}") from error
        connection = cls(protocol)
        login = endpoint.login(name)
        try:
            replies = await asyncio.wait_for(  # a server that accepts but never answers
                connection.send([encode(argv) for argv in login]), endpoint.connect_timeout_s)
            for argv, reply in zip(login, replies, strict=True):
                if isinstance(reply, Exception) and argv[1:2] != ("SETINFO",):
                    raise reply  # a refused password (AuthenticationError), or database
            connection.client_id = replies[-1] if isinstance(replies[-1], int) else 0
        except BaseException:
            connection.close()
            raise
        return connection

    @property
    def broken(self) -> bool:
        return self._protocol.lost is not None

    def send(self, requests: list[bytes]) -> asyncio.Future[list[Any]]:
        protocol = self._protocol
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        if protocol.lost is not None:
            future.set_exception(protocol.lost)
            return future
        transport = protocol.transport
        assert transport is not None  # connected (open() returns once it is)
        protocol.waiting.append((future, len(requests), []))
        transport.write(b"".join(requests))
        return future

    def close(self) -> None:
        self._protocol._fail(RedisConnectionError("connection closed by the worker"))

    def retire(self) -> None:
        """Close once the replies in flight are in (its line moved to another front)."""
        waiting = self._protocol.waiting
        if waiting:
            waiting[-1][0].add_done_callback(lambda _: self.close())
        else:
            self.close()
