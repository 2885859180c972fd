"""A small pipelining RESP client, the same for both servers.

The benchmark measures servers, so the client must cost as little as
possible per command: requests are encoded once into bytes, a pipeline is one
`write`, and replies are parsed by hiredis straight from `data_received`.
Errors come back as `hiredis.ReplyError` values, never raised, so a scenario
decides what an error means.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import hiredis

ReplyError = hiredis.ReplyError


def encode(*args: bytes | str | int) -> bytes:
    """One request as a RESP multi-bulk."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if type(arg) is bytes else str(arg).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: deque[tuple[asyncio.Future[list[Any]], int, list[Any]]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        waiting = self.waiting
        while True:
            reply = reader.gets()
            if reply is False:
                return
            future, count, replies = waiting[0]
            replies.append(reply)
            if len(replies) == count:
                waiting.popleft()
                if not future.done():
                    future.set_result(replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("server closed the connection")
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(self.lost)


class Client:
    """One connection. `pipeline(requests)` sends encoded requests, returns their replies."""

    def __init__(self, protocol: _Protocol) -> None:
        self._protocol = protocol

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> Client:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(_Protocol, host, port)
        return cls(protocol)

    async def pipeline(self, requests: list[bytes]) -> list[Any]:
        if not requests:
            return []
        protocol = self._protocol
        if protocol.lost is not None:
            raise protocol.lost
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        protocol.waiting.append((future, len(requests), []))
        protocol.transport.write(b"".join(requests))  # type: ignore[union-attr]
        return await future

    async def call(self, *args: bytes | str | int) -> Any:
        return (await self.pipeline([encode(*args)]))[0]

    def close(self) -> None:
        if self._protocol.transport is not None:
            self._protocol.transport.close()
