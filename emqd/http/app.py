"""The HTTP side: the aiohttp application, started on the server's own event loop.

`start(sock)` is all `emqd/serve/lifecycle.py` calls: it builds the app, listens on
the socket bound to `--bind`:`--http-port` (before the log loaded,
emqd/serve/sockets.py), registers the metrics' event listener with the commit path,
and starts the minute timer that samples the rates; `stop()`
undoes it. Pages and /metrics read the store synchronously inside their
handler (one atomic read, like a verb), and actions run EMQ verbs
(actions.py), so nothing here needs a lock or a thread.

Why aiohttp: its server runs on the running asyncio loop (uvloop here) with
no thread or second loop, so a handler can read the keyspace between two
verbs the way a connection does; it is maintained, typed, and has the
multipart/form parsing, cookies and static files a dashboard needs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from emqd import clock
from emqd.cluster.front import Front
from emqd.core import Core
from emqd.http import actions, cleaning, pages, workers
from emqd.http.context import DASHBOARD, Dashboard
from emqd.http.gate import Gate
from emqd.http.rates import MINUTE_MS
from emqd.http.relay import RELAY, Relay, through_owner
from emqd.http.security import Handler, guard

log = logging.getLogger("emqd")

STATIC = Path(__file__).parent / "static"
TITLES = {400: "Bad request", 404: "Not found", 405: "Method not allowed",
          503: "Not available now"}


@web.middleware
async def error_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A 400, 404 or 405 as a page of ours (with its reason), not aiohttp's plain text."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status not in TITLES:
            raise
        return Dashboard.of(request).render(
            request, "error.html", status=exc.status, title=TITLES[exc.status],
            # a 503's text says why (the log, the cluster, the queue's front): shown as is
            reason=exc.text if exc.status == 503 else exc.reason, headers=exc.headers)


def build_app(dashboard: Dashboard, password: str | None,
              relay: Relay | None = None) -> web.Application:
    refused = dashboard.core.stats.auth_failures.refused
    app = web.Application(middlewares=[guard(password, refused), error_pages],
                          client_max_size=64 << 10)  # the largest form is a few fields
    app[DASHBOARD] = dashboard
    if relay is not None:
        app[RELAY] = relay
    add_get, add_post = app.router.add_get, app.router.add_post
    add_get("/", pages.overview)
    add_get("/live/overview", pages.overview_live)
    add_get("/metrics", pages.metrics)
    add_get("/workers", workers.workers_page)
    add_get("/workers/held", workers.held_here)
    add_post("/workers/{order:quiet|stop|run}", actions.order_worker)

    # A queue's pages and buttons: served by the front that owns it (relay.py).
    def get(path: str, handler: Handler) -> None:
        add_get(path, through_owner(handler))

    def post(path: str, handler: Handler) -> None:
        add_post(path, through_owner(handler))

    get("/queues/{queue}", pages.queue_page)
    get("/queues/{queue}/dead", pages.dead_page)
    get("/queues/{queue}/dead/revive-all", pages.revive_all_confirm)
    post("/queues/{queue}/dead/revive-all", actions.revive_all)
    post("/queues/{queue}/{verb:pause|resume}", actions.steer)
    post("/queues/{queue}/completed/clean", cleaning.clean_completed)
    get("/queues/{queue}/jobs/{id}", pages.job_page)
    post("/queues/{queue}/jobs/{id}/{action:revive|promote|remove|cancel}", actions.job_action)
    app.router.add_static("/static/", STATIC)
    return app


class HttpSide:
    """The running HTTP side of one server."""

    def __init__(self, core: Core, blocked: Callable[[], int],
                 wake: Callable[[], None], front: Front | None = None) -> None:
        self.core = core
        self.relay = Relay(front) if front is not None else None
        self.dashboard = Dashboard(core, blocked, wake, front)
        self.runner: web.AppRunner | None = None
        self.listener: asyncio.AbstractServer | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def start(self, sock: socket.socket) -> None:
        """Serve on `sock`, bound already (listen.bind_http) to --bind:--http-port, behind
        the gate that bounds the HTTP connections and their heads (emqd/http/gate.py)."""
        config = self.core.config
        app = build_app(self.dashboard, config.requirepass, self.relay)
        head_timeout_s = config.http_head_timeout_ms / 1000
        # aiohttp's own bound on an idle kept-alive connection, the head's deadline too
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                    keepalive_timeout=head_timeout_s)
        await self.runner.setup()
        server = self.runner.server
        assert server is not None
        gate = Gate(server, config.http_maxclients, head_timeout_s)  # emqd/http/gate.py
        self.listener = await asyncio.get_running_loop().create_server(gate, sock=sock)
        host, port = sock.getsockname()[:2]
        self.core.commit.listen(self.dashboard.metrics.timings.listen)
        self._sample()
        shown = f"[{host}]" if ":" in host else host
        log.info("emqd dashboard on http://%s:%d/ (metrics on /metrics)", shown, port)

    def _sample(self) -> None:
        """Sample the rates now, then again just after the next minute boundary."""
        self.dashboard.sample_rates()
        wait_ms = MINUTE_MS - clock.now_ms() % MINUTE_MS + 50
        self._timer = asyncio.get_running_loop().call_later(wait_ms / 1000, self._sample)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.listener is not None:
            self.listener.close()  # no new connection; the runner closes the open ones
        self.core.commit.unlisten(self.dashboard.metrics.timings.listen)
        if self.runner is not None:
            await self.runner.cleanup()
        if self.relay is not None:
            await self.relay.close()
