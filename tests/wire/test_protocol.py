"""A client connection (emqd/wire/protocol.py), in process: real `Connection`s of a real
`Server`, over a socket stand-in that records what is written and whether it closed.

Framing across reads, a pipeline answered in one write, broken framing answered after
the requests before it, the maxclients refusal, a write's reply held for the log, and
what a closed connection leaves behind (nothing).
"""

from __future__ import annotations

import asyncio
from typing import Any

from emqd.commit.plan import Plan
from emqd.commit.sink import Sink
from emqd.config import Config
from emqd.serve.lifecycle import Server
from emqd.wire.protocol import Connection
from tests.support import encode_request


class Socket(asyncio.Transport):
    """What the connection writes, in order, one entry a write(2); never backs up."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 6390)}.get(
            name, default)

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def connect(server: Server) -> tuple[Connection, Socket]:
    conn, socket = Connection(server.hub), Socket()
    conn.connection_made(socket)
    return conn, socket


def test_a_request_split_across_reads_is_answered_once_whole() -> None:
    conn, socket = connect(Server(Config()))
    request = encode_request("ECHO", "hello")
    conn.data_received(request[:7])
    assert socket.writes == []
    conn.data_received(request[7:])
    assert socket.writes == [b"$5\r\nhello\r\n"]


def test_a_pipeline_is_answered_in_order_in_one_write() -> None:
    conn, socket = connect(Server(Config()))
    conn.data_received(encode_request("PING") + encode_request("HSET", "h", "f", "v")
                       + encode_request("HGET", "h", "f"))
    assert socket.writes == [b"+PONG\r\n:1\r\n$1\r\nv\r\n"]


def test_broken_framing_is_answered_after_the_requests_before_it_then_closes() -> None:
    conn, socket = connect(Server(Config()))
    conn.data_received(encode_request("PING") + b"*1\r\n$x\r\n" + encode_request("PING"))
    assert socket.writes == [b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"]
    assert socket.closed and conn.closed
    conn.data_received(encode_request("PING"))  # nothing more is run
    assert len(socket.writes) == 1


def test_past_maxclients_a_connection_is_told_and_closed() -> None:
    server = Server(Config(maxclients=1))
    first, _ = connect(server)
    second, socket = connect(server)
    assert socket.writes == [b"-ERR max number of clients reached\r\n"] and socket.closed
    assert second.closed and list(server.core.clients) == [first.session.id]
    assert server.core.stats.rejected_connections == 1


class HeldLog(Sink):
    """A log whose records are durable only once the test says so (`kept`), as a remote
    store acknowledges later."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = 0

    @property
    def durable(self) -> int:
        return self.kept

    def append(self, plan: Plan) -> None:
        self.appended += 1

    def append_batch(self, plans: list[Plan]) -> None:
        self.appended += 1

    def write_now(self) -> bool:
        return False


def test_a_writes_reply_and_the_requests_behind_it_wait_for_the_log() -> None:
    log = HeldLog()
    server = Server(Config(), sink=log)
    conn, socket = connect(server)
    conn.data_received(encode_request("HSET", "h", "f", "v") + encode_request("PING"))
    assert socket.writes == [] and conn.holding == 1
    conn.data_received(encode_request("HGET", "h", "f"))  # its reply queues behind them
    assert socket.writes == []
    log.kept = log.appended
    server.commit.flush()
    assert b"".join(socket.writes) == b":1\r\n+PONG\r\n$1\r\nv\r\n"


def test_a_closed_connection_leaves_no_client_and_no_subscription() -> None:
    server = Server(Config())
    conn, socket = connect(server)
    conn.data_received(encode_request("SUBSCRIBE", "news"))
    assert server.core.pubsub.numsub(b"news") == 1
    assert server.connections[conn.session.id] is conn
    conn.connection_lost(None)
    assert server.core.pubsub.numsub(b"news") == 0
    assert conn.session.id not in server.core.clients
    assert conn.session.id not in server.connections
