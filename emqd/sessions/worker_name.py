"""How a worker names its connections (CLIENT SETNAME), so the dashboard can list it.

The name is a URL query behind a fixed prefix, percent-encoded so that it holds
no space or newline (which CLIENT SETNAME refuses) whatever the host or queue is
called:

    emqd-worker?host=web-1&pid=4242&queue=mail&concurrency=10&started=1733212345678

`queue` may repeat (a worker of several queues); `started` is when the worker
started (Unix ms). Any client can name itself so (docs/CLIENT.md); the emqd
Worker does. The dashboard's Workers page (emqd/http/workers.py) reads it back
with `parse`; the standard library only, so that both sides can import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

PREFIX = "emqd-worker?"


@dataclass(frozen=True, slots=True)
class WorkerName:
    host: str
    pid: int | None
    queues: tuple[str, ...]
    concurrency: int | None
    started_ms: int | None


def build(host: str, pid: int, queues: list[str], concurrency: int, started_ms: int) -> str:
    pairs = [("host", host), ("pid", pid), *[("queue", queue) for queue in queues],
             ("concurrency", concurrency), ("started", started_ms)]
    return PREFIX + urlencode(pairs, safe="")


def parse(name: str) -> WorkerName | None:
    """The fields of a worker's name; None for a name that is not one (any other client's)."""
    if not name.startswith(PREFIX):
        return None
    fields = parse_qs(name[len(PREFIX):], keep_blank_values=True)

    def number(key: str) -> int | None:
        raw = fields.get(key, [""])[0]
        return int(raw) if raw.isdigit() and len(raw) <= 20 else None

    return WorkerName(fields.get("host", [""])[0], number("pid"),
                      tuple(fields.get("queue", [])), number("concurrency"), number("started"))
