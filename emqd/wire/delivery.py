"""Pub/Sub messages onto subscribers' connections; a subscriber that lags is closed.

The registry (emqd/sessions/pubsub.py) hands each frame to `Delivery`, which writes it
through the commit path (emqd/commit/path.py `send`: under a strict sink, such as
`--appendfsync always`, a message waits like a reply for the records before it;
a queue event also waits for the record of the plan it reports, its `needed`
offset, under every policy) and then applies Redis's
`client-output-buffer-limit pubsub` to what the connection has not sent yet.
A subscriber that does not read therefore costs the server at most the hard
limit, and its publishers nothing more than a buffered write: nothing waits
for it.
"""

from __future__ import annotations

from emqd.config import Config
from emqd.sessions.pubsub import Subscriber
from emqd.wire.output_limit import OutputLimit, check
from emqd.wire.protocol import Connection, close_lagging


class Delivery:
    """The pubsub limit is the one of the moment: `CONFIG SET client-output-buffer-limit`
    replaces the Config, and the next message sees the new one."""

    __slots__ = ("connections", "limit", "_config")

    def __init__(self, connections: dict[int, Connection]) -> None:
        self.connections = connections  # the server's live connections, by session id
        self._config: Config | None = None  # the Config `limit` was made from
        self.limit = OutputLimit(0, 0, 0)

    def __call__(self, session: Subscriber, frame: bytes, needed: int = 0) -> None:
        conn = self.connections.get(session.id)
        if conn is None or conn.closed or conn.transport is None:
            return  # closing: it is still counted as a receiver, as in Redis
        conn.send(frame, needed, eager=not needed, own=needed)  # a lost record: no message
        subs = session.pubsub
        assert subs is not None  # the registry delivers to subscribers only
        unsent = conn.transport.get_write_buffer_size()
        config = conn.session.core.config
        if config is not self._config:
            self._config = config
            self.limit = OutputLimit(config.pubsub_hard_limit, config.pubsub_soft_limit,
                                     config.pubsub_soft_seconds)
        close, subs.lagging_since_ms = check(self.limit, unsent, subs.lagging_since_ms)
        if close:
            close_lagging(conn, unsent, "pubsub")
