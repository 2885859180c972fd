"""A stand-in for a cluster node on 127.0.0.1: a RESP server whose answers a test writes.

`FakeNode(answer)` answers each request with `answer(argv)`: a reply value (encoded
as emqd encodes replies), a `NodeError` for an error reply, or SILENT to answer
nothing more on that connection (a node that stopped without closing its
connections). It records every request and counts its connections; `close()`
stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import hiredis

from emqd.cluster.nodes import NodeError
from emqd.wire.resp import encode

SILENT = object()


def cluster_nodes(lines: list[tuple[str, int, str, str, int, str]]) -> bytes:
    """A CLUSTER NODES answer: (id, port, flags, master id or -, config epoch, slots)."""
    return "".join(f"{node_id} 127.0.0.1:{port}@{port + 10000} {flags} {master} 0 0 {epoch} "
                   f"connected {slots}".rstrip() + "\n"
                   for node_id, port, flags, master, epoch, slots in lines).encode()


class FakeNode:
    def __init__(self, answer: Callable[[list[bytes]], Any]) -> None:
        self.answer = answer
        self.requests: list[list[bytes]] = []
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> FakeNode:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        parser = hiredis.Reader()
        silent = False
        try:
            while data := await reader.read(65536):
                parser.feed(data)
                while (argv := parser.gets()) is not False:
                    self.requests.append(argv)
                    reply = self.answer(argv)
                    silent = silent or reply is SILENT
                    if silent:
                        continue
                    if isinstance(reply, NodeError):
                        writer.write(b"-" + reply.text.encode() + b"\r\n")
                    else:
                        writer.write(encode(reply, 2))
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the test's loop ends
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()
