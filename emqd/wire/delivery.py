"""Pub/Sub messages onto subscribers' connections; a subscriber that lags is closed.

The registry (emqd/pubsub.py) hands each frame to `Delivery`, which writes it
through the server's write path (`Server.write`: under `--appendfsync
always` a message waits, like a reply, for the records before it to be on
disk; a queue event also waits for the record of the plan it reports, its
`needed` offset, under every policy) and then applies Redis's
`client-output-buffer-limit pubsub` to what the connection has not sent yet.
A subscriber that does not read therefore costs the server at most the hard
limit, and its publishers nothing more than a buffered write: nothing waits
for it.

`close_lagging` is the one way a client is closed for its output limit
(logged as Redis logs it, counted for INFO's
`client_output_buffer_limit_disconnections`), for any class of client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from emqd.output_limit import OutputLimit, check

if TYPE_CHECKING:
    from emqd.config import Config
    from emqd.server import Server
    from emqd.session import Session
    from emqd.wire.protocol import Connection

log = logging.getLogger("emqd")


class Delivery:
    """The pubsub limit is the one of the moment: `CONFIG SET client-output-buffer-limit`
    replaces the server's Config, and the next message sees the new one."""

    __slots__ = ("server", "limit", "_config")

    def __init__(self, server: Server) -> None:
        self.server = server
        self._config: Config | None = None  # the Config `limit` was made from
        self.limit = self._limit()

    def _limit(self) -> OutputLimit:
        config = self._config = self.server.state.config
        return OutputLimit(config.pubsub_hard_limit, config.pubsub_soft_limit,
                           config.pubsub_soft_seconds)

    def __call__(self, session: Session, frame: bytes, needed: int = 0) -> None:
        server = self.server
        conn = server.connections.get(session.id)
        if conn is None or conn.closed or conn.transport is None:
            return  # closing: it is still counted as a receiver, as in Redis
        server.write(conn, frame, needed)
        subs = session.pubsub
        assert subs is not None  # the registry delivers to subscribers only
        unsent = conn.transport.get_write_buffer_size()
        if server.state.config is not self._config:
            self.limit = self._limit()
        close, subs.lagging_since_ms = check(self.limit, unsent, subs.lagging_since_ms)
        if close:
            close_lagging(server, conn, unsent, "pubsub")


def close_lagging(server: Server, conn: Connection, unsent: int, kind: str) -> None:
    """Drop a client whose unsent output passed its class's limit (what is unsent is lost)."""
    server.state.output_limit_disconnections += 1
    session = conn.session
    log.warning(
        "Client id=%d addr=%s name=%s closed for overcoming of output buffer limits "
        "(%s, %d bytes unsent)",
        session.id, session.addr, session.name.decode("latin-1"), kind, unsent,
    )
    conn.closed = True  # nothing more is written to it; connection_lost cleans up
    conn.transport.abort()  # type: ignore[union-attr]
