"""The HTTP side's own limits, so that the dashboard port can never take the queue port down.

aiohttp bounds a request's head by size (`max_line_size`, `max_field_size`,
`max_headers`) and an idle keep-alive connection by time
(`keepalive_timeout`, which emqd sets to the same deadline), but it has no
deadline for the head of a connection's first request and no cap on
connections: `GET / HTTP/1.1\\r\\nHost: x\\r\\n` and nothing more held a
descriptor for ever, and 300 of them took every descriptor the queue's
clients needed. So every HTTP connection comes through `Gate`, the protocol
factory handed to `loop.create_server` in aiohttp's place:

- at most `--http-maxclients` connections at once; the next is answered
  `503 Service Unavailable` and closed (their descriptors are kept apart
  from the queue's clients: emqd/serve/fd_limit.py);
- a connection whose first request head (up to its blank line) has not
  arrived within `--http-head-timeout-ms` (10 s) is answered
  `408 Request Timeout` and closed. Later requests on a kept-alive connection
  are bounded by aiohttp's `keepalive_timeout`.

Everything else is aiohttp's own request handler, to which `_Guarded` passes
every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

_END_OF_HEAD: Final = b"\r\n\r\n"


def _response(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


BUSY: Final = _response("503 Service Unavailable",
                        "503: emqd's HTTP side has too many connections (--http-maxclients)\n")
TOO_SLOW: Final = _response("408 Request Timeout",
                            "408: the request head did not arrive in time "
                            "(--http-head-timeout-ms)\n")


class Gate:
    """Counts the HTTP connections and guards each one (see the module's docstring)."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], maxclients: int,
                 head_timeout_s: float) -> None:
        self.factory = factory  # aiohttp's web.Server: one request handler per connection
        self.maxclients = maxclients
        self.head_timeout_s = head_timeout_s
        self.open = 0  # guarded connections now
        self.refused = 0  # answered 503 (over the cap) or 408 (head too slow)

    def __call__(self) -> asyncio.Protocol:
        if self.open >= self.maxclients:
            return _Refused(self)
        return _Guarded(self, self.factory())


class _Refused(asyncio.Protocol):
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.gate.refused += 1
        transport.write(BUSY)  # type: ignore[attr-defined]
        transport.close()


class _Guarded(asyncio.Protocol):
    """aiohttp's handler for one connection, with the head's deadline."""

    def __init__(self, gate: Gate, inner: asyncio.Protocol) -> None:
        self.gate = gate
        self.inner = inner
        self.transport: Any = None
        self.timer: asyncio.TimerHandle | None = None
        self.tail = b""  # the last bytes before the head's end was seen (it may be split)
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.gate.open += 1
        self.counted = True
        self.timer = asyncio.get_running_loop().call_later(self.gate.head_timeout_s,
                                                           self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        self.timer = None
        self.gate.refused += 1
        self.transport.write(TOO_SLOW)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.timer is not None:
            seen = self.tail + data
            if _END_OF_HEAD in seen:
                self.timer.cancel()
                self.timer = None
            else:
                self.tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.counted:
            self.counted = False
            self.gate.open -= 1
        self.inner.connection_lost(exc)
