"""What every handler shares: the `Dashboard` (state, metrics, rates, templates) and URLs.

Queue names and job ids are bytes, and may hold `/`, `%` or bytes that are
not UTF-8. Links percent-encode every byte (`present.path_part`), and
handlers read them back from the raw path (`segment`), never from aiohttp's
decoded `match_info`, which cannot tell the byte 0xFF from the text `%FF`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote_to_bytes

import jinja2
from aiohttp import web

from emqd import __version__, clock
from emqd.core import Core
from emqd.errors import ReplyError
from emqd.http import present, reading
from emqd.http.metrics import Metrics
from emqd.http.rates import RateHistory
from emqd.rules import args as verb_args
from emqd.store.keyspace import Keyspace

if TYPE_CHECKING:
    from emqd.cluster.front import Front

DASHBOARD: web.AppKey[Dashboard] = web.AppKey("dashboard")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("emqd.http", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        shown=present.shown, part=present.path_part, number=present.number,
        when=present.when, span=present.span,
    )
    env.globals["took"] = present.took
    env.globals["relative"] = present.relative
    env.globals.update(queue_url=queue_url, job_url=job_url, version=__version__)
    return env


class Dashboard:
    """The HTTP side's view of one server."""

    def __init__(self, core: Core, blocked: Callable[[], int],
                 wake: Callable[[], None], front: Front | None = None) -> None:
        self.core = core
        self.blocked = blocked
        self.wake = wake  # re-runs parked claimers after an action (Server.wake_parked)
        self.front = front  # cluster mode: this front (its registry, its owners, its fronts)
        self.metrics = Metrics(core, blocked, clock.now_ms,
                               None if front is None else front.address.decode("latin-1"))
        self.rates = RateHistory()
        self.templates = _environment()

    @staticmethod
    def of(request: web.Request) -> Dashboard:
        return request.app[DASHBOARD]

    def sample_rates(self) -> None:
        """Note every queue's counters as the start of this minute (rates.py)."""
        keyspace = self.core.keyspace
        now = clock.now_ms()
        self.rates.sample(now, {queue: reading.rate_counters(keyspace, queue)
                                for queue in reading.queue_names(keyspace)})

    def render(self, request: web.Request, name: str, status: int = 200,
               **context: object) -> web.Response:
        context.setdefault("notice", None)
        text = self.templates.get_template(name).render(
            csrf=request.get("csrf", ""), now_ms=clock.now_ms(), **context)
        return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def segment(request: web.Request, index: int) -> bytes:
    """The `index`th segment of the raw path after its leading `/`, percent-decoded to bytes."""
    parts = request.rel_url.raw_path.split("/")[1:]
    return unquote_to_bytes(parts[index]) if index < len(parts) else b""


def query_bytes(request: web.Request, name: str) -> bytes | None:
    """A query parameter as the bytes it encodes (a search for an id that is not UTF-8)."""
    values = parse_qs(request.rel_url.raw_query_string, encoding="latin-1")
    found_values = values.get(name)
    return found_values[0].encode("latin-1") if found_values else None


def found(request: web.Request, keyspace: Keyspace) -> bytes:
    """The queue named by the path (`/queues/<queue>/...`), or the 404 page."""
    queue = segment(request, 1)
    try:
        verb_args.queue_name(queue)
    except ReplyError:
        raise web.HTTPNotFound(reason="no such queue") from None
    if not reading.queue_exists(keyspace, queue):
        raise web.HTTPNotFound(reason="no such queue")
    return queue


def queue_url(queue: bytes, suffix: str = "") -> str:
    return f"/queues/{present.path_part(queue)}{suffix}"


def job_url(queue: bytes, job_id: bytes, suffix: str = "") -> str:
    return f"{queue_url(queue)}/jobs/{present.path_part(job_id)}{suffix}"
