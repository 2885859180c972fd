"""Big replies (reply.Stream): `encode`'s bytes, made a chunk at a time as the socket takes them.

`stream_chunks` must agree with `encode` for every shape a command streams (bulk
arrays, maps and WITHSCORES pairs in both protocols), across chunk edges. Then
connections in this process, with fake transports, answer HGETALL, HKEYS, KEYS and
ZRANGE of big collections: the bytes are `encode`'s; what the command allocated at
its peak is a small part of the reply (before: the reply was built twice, from a
million small pieces, about three times its size); a client that does not read
gets a chunk, not the whole reply, and the requests behind it wait; what it gets
later is what the store held when the command ran; and a client that reads as fast
as it is written lets others in between chunks. Items are some 90 bytes long, as a
job's key is, so that the snapshot of references a command makes is small beside
them.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import pytest

from emqd.compat.numbers import format_double
from emqd.config import Config
from emqd.reply import PAIRS, SCORED, STREAM_MIN, Stream
from emqd.serve.lifecycle import Server
from emqd.wire.protocol import STREAM_TURN, Connection
from emqd.wire.resp import STREAM_ITEMS, encode, stream_chunks
from tests.support import encode_request

SIZES = [0, 1, STREAM_ITEMS - 1, STREAM_ITEMS, STREAM_ITEMS + 1, 3 * STREAM_ITEMS + 7]


def joined(stream: Stream, resp: int) -> bytes:
    return b"".join(stream_chunks(stream, resp))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("resp", [2, 3])
def test_a_stream_encodes_as_encode_does(size: int, resp: int) -> None:
    values = [b"v%d" % i * (i % 7) for i in range(size)]  # empty ones among them
    values[size // 2:size // 2 + 1] = [b"L" * 2000] if size else []  # a long header
    assert joined(Stream(values, size), resp) == encode(values, resp)
    assert joined(Stream(iter(values), size), resp) == encode(values, resp)
    names = [b"f%d" % i for i in range(size)]
    assert joined(Stream((names, values), size, PAIRS), resp) == encode(
        dict(zip(names, values, strict=True)), resp)
    pairs = [(i * 0.5 - 3, value) for i, value in enumerate(values)] + [(-0.0, b"z")]
    expected = ([[member, score] for score, member in pairs] if resp == 3
                else [x for score, member in pairs for x in (member, format_double(score))])
    assert joined(Stream(iter(pairs), size + 1, SCORED), resp) == encode(expected, resp)
    assert encode([Stream(values, size)], resp) == encode([values], resp)  # nested: whole


class Transport:
    """A socket that takes everything (counting it) or, `slow`, takes nothing past a
    first 64 KiB: then the connection is told to pause, as asyncio tells it."""

    def __init__(self, conn: Connection, keep: bool = True, slow: bool = False) -> None:
        self.conn, self.keep, self.slow = conn, keep, slow
        self.writes: list[bytes] = []
        self.bytes = 0
        self.unsent = 0

    def write(self, data: bytes) -> None:
        self.bytes += len(data)
        if self.keep:
            self.writes.append(data)
        if self.slow:
            self.unsent += len(data)
            if self.unsent > 65536 and not self.conn.paused:
                self.conn.pause_writing()

    def drain(self) -> None:
        self.unsent = 0
        self.conn.resume_writing()

    def taken(self) -> bytes:
        data = b"".join(self.writes)
        self.writes.clear()
        return data

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1)

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...


FIELDS = 100_000
SETUP = [
    encode_request("HSET", "h", *(x for i in range(FIELDS)
                                  for x in (b"f" * 80 + b"%06d" % i, b"v" * 100))),
    encode_request("ZADD", "z", *(x for i in range(FIELDS)
                                  for x in (b"%d" % i, b"m" * 90 + b"%09d" % i))),
    *(encode_request("HSET", b"key:%06d" % i + b"k" * 80, "f", "v") for i in range(FIELDS)),
]
BIG = [("HGETALL", "h"), ("HKEYS", "h"), ("HVALS", "h"), ("KEYS", "*"), ("KEYS", "key:*"),
       ("ZRANGE", "z", 0, -1), ("ZRANGE", "z", 0, -1, "REV"),
       ("ZRANGE", "z", 0, -1, "WITHSCORES"), ("ZRANGEBYSCORE", "z", "-inf", "+inf")]


@pytest.fixture(scope="module")
def server() -> Server:
    server = Server(Config(appendonly=False, http_port=0))
    conn = connect(server, keep=False)
    for request in SETUP:
        conn.data_received(request)
    return server


def connect(server: Server, keep: bool = True, slow: bool = False) -> Connection:
    conn = Connection(server.hub)
    conn.connection_made(Transport(conn, keep, slow))  # type: ignore[arg-type]
    return conn


def transport(conn: Connection) -> Transport:
    return conn.transport  # type: ignore[return-value]


async def settled(conn: Connection) -> None:
    """Let the loop run the rest of a stream that yielded it."""
    for _ in range(10_000):
        if conn.streaming is None and not conn.pending:
            return
        await asyncio.sleep(0)
    raise AssertionError("the stream never ended")


def expected(server: Server, command: tuple[Any, ...], resp: int) -> bytes:
    """The reply as `encode` makes it from plain values (what main answered)."""
    data = server.core.keyspace.data
    name = command[0]
    if name == "HGETALL":
        return encode(dict(data[b"h"]), resp)
    if name in ("HKEYS", "HVALS"):
        row = data[b"h"]
        return encode(list(row) if name == "HKEYS" else list(row.values()), resp)
    if name == "KEYS":
        return encode([key for key in data if command[1] == "*" or key.startswith(b"key:")],
                      resp)
    zset = data[b"z"]
    pairs = list(zset.walk(0, len(zset), "REV" in command))
    if "WITHSCORES" in command:
        if resp == 3:
            return encode([[member, score] for score, member in pairs], resp)
        return encode([x for score, member in pairs for x in (member, score)], resp)
    return encode([member for _, member in pairs], resp)


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("command", BIG, ids=lambda argv: " ".join(map(str, argv)))
async def test_a_big_reply_is_written_in_chunks_made_once(server: Server, command: tuple,
                                                          resp: int) -> None:
    conn = connect(server, keep=False)
    conn.session.resp = resp
    request = encode_request(*command)
    tracemalloc.start()
    try:
        conn.data_received(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await settled(conn)
    size = transport(conn).bytes
    assert peak < 0.25 * size, f"{command}: {peak / size:.2f}x the reply at its peak"
    conn = connect(server)
    conn.session.resp = resp
    conn.data_received(request)
    await settled(conn)
    writes = transport(conn).writes
    assert len(writes) > size // (1 << 20)  # in chunks, not one string
    reply = transport(conn).taken()
    assert reply == expected(server, command, resp)
    # inside EXEC the same reply, encoded whole into EXEC's array
    conn.data_received(encode_request("MULTI") + request + encode_request("EXEC"))
    assert transport(conn).taken() == b"+OK\r\n+QUEUED\r\n*1\r\n" + reply


def test_small_replies_are_not_streamed(server: Server) -> None:
    conn = connect(server)
    conn.data_received(encode_request("ZRANGE", "z", 0, STREAM_MIN - 2))
    assert len(transport(conn).writes) == 1 and conn.streaming is None


async def test_a_client_that_does_not_read_gets_a_chunk_and_what_the_store_held(
        server: Server) -> None:
    """The rest of the reply is not made while the socket is full; the requests behind it
    wait (the PING); writes by others meanwhile do not show in it."""
    reader = connect(server, slow=True)
    reader.data_received(encode_request("HGETALL", "h") + encode_request("PING"))
    assert reader.paused and reader.streaming is not None
    first = transport(reader).bytes
    assert first < 1 << 20  # ~64 KiB and a chunk, of a 20 MB reply
    writer = connect(server)
    try:
        writer.data_received(encode_request("HSET", "h", b"f" * 80 + b"000007", "changed")
                             + encode_request("HSET", "h", "new", "field"))
        assert transport(writer).taken() == b":0\r\n:1\r\n"  # served meanwhile
        before = dict(server.core.keyspace.data[b"h"])
        before[b"f" * 80 + b"000007"] = b"v" * 100
        del before[b"new"]
        for _ in range(10_000):
            if reader.streaming is None:
                break
            transport(reader).drain()
            await asyncio.sleep(0)
        data = transport(reader).taken()
        assert data == encode(before, 2) + b"+PONG\r\n"
    finally:
        writer.data_received(encode_request("HSET", "h", b"f" * 80 + b"000007", "v" * 100)
                             + encode_request("HDEL", "h", "new"))


async def test_a_fast_reader_lets_other_clients_in_between_chunks(server: Server) -> None:
    big = connect(server, keep=False)
    big.data_received(encode_request("HGETALL", "h"))
    assert big.streaming is not None  # it yielded the loop after STREAM_TURN chunks
    written = transport(big).bytes
    other = connect(server)
    other.data_received(encode_request("PING"))
    assert transport(other).taken() == b"+PONG\r\n"
    await settled(big)
    assert transport(big).bytes > 1.3 * written
    assert STREAM_TURN * STREAM_ITEMS < FIELDS


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_a_streamed_reply_waits_for_the_log_and_keeps_its_place(tmp_path: Any,
                                                                 fsync: str) -> None:
    """Over a real socket with the log on: a big reply after the client's own write
    waits for the record (its first chunk does) and shows it, and the replies around
    it keep their order."""
    from tests.support import RawClient, start_emqd

    server = start_emqd("--appendonly", "yes", "--appendfsync", fsync, dir=str(tmp_path))
    try:
        client = RawClient(server.port, timeout=20)
        fields = 3 * STREAM_MIN * STREAM_TURN // 16
        client.send(encode_request("HSET", "h", *(x for i in range(fields)
                                                  for x in (b"f%d" % i, b"v" * 50))))
        assert client.read_reply() == b":%d\r\n" % fields
        client.send(encode_request("HSET", "h", "f0", "first") + encode_request("HGETALL", "h")
                    + encode_request("HGET", "h", "f0"))
        assert client.read_reply() == b":0\r\n"
        reply = client.read_reply()
        assert reply.startswith(b"*%d\r\n$2\r\nf0\r\n$5\r\nfirst\r\n" % (2 * fields))
        assert client.read_reply() == b"$5\r\nfirst\r\n"
        client.close()
    finally:
        server.stop()
