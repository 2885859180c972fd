"""A small pipelining RESP client, the same for both servers.

The benchmark measures servers, so the client must cost as little as
possible per command: requests are encoded once into bytes, a pipeline is one
`write`, and replies are parsed by hiredis straight from `data_received` (the
Worker's own pipelining protocol, emqd/client/connection.py `Replies`). Errors
come back as `hiredis.ReplyError` values, never raised, so a scenario decides
what an error means.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis

from emqd.client.connection import Connection, Replies
from emqd.client.request import encode

__all__ = ["Client", "ReplyError", "encode"]

ReplyError = hiredis.ReplyError


class Client:
    """One connection. `pipeline(requests)` sends encoded requests, returns their replies."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> Client:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(lambda: Replies(ReplyError), host, port)
        return cls(Connection(protocol))

    async def pipeline(self, requests: list[bytes]) -> list[Any]:
        if not requests:
            return []
        return await self._connection.send(requests)

    async def call(self, *args: bytes | str | int) -> Any:
        return (await self.pipeline([encode(*args)]))[0]

    def close(self) -> None:
        self._connection.close()
