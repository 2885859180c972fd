"""Real connections over a socket that records: the write path, in process.

The compiled core types its connections, so a stand-in object will not do:
tests build a real `Connection` and give it a transport that keeps what it
is sent, as (connection name, what `shows` makes of the bytes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from emqd.core import Session
from emqd.serve.lifecycle import Server
from emqd.wire.protocol import Connection


class RecordingTransport(asyncio.Transport):
    """A socket that records what it is sent and never backs up."""

    def __init__(self, events: list, name: str, shows: Callable[[bytes], Any] = bytes) -> None:
        super().__init__()
        self.events, self.name, self.shows = events, name, shows

    def write(self, data: Any) -> None:
        self.events.append((self.name, self.shows(data)))

    def get_write_buffer_size(self) -> int:
        return 0


def connection(server: Server, events: list, name: str, session: Session | None = None,
               shows: Callable[[bytes], Any] = bytes) -> Connection:
    """A real connection, as the write path sees it, over a recording transport."""
    conn = Connection(server.hub)
    conn.transport = RecordingTransport(events, name, shows)
    conn.session = session or Session(server.core)
    server.connections[conn.session.id] = conn
    return conn
