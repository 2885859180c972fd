"""The dashboard's pages (GET), each one synchronous read of the store, like a verb.

Costs: the overview is O(queues) (`reading.queue_figures` is O(1) a queue);
a queue's job list and the dead letters are O(log n + PAGE); a job is one row;
a payload search is bounded by `reading.SEARCH_ROWS` / `SEARCH_BYTES`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from emqd import clock
from emqd.cluster.nodes import FAILED
from emqd.compat.numbers import parse_int
from emqd.http import cluster_queues, present, reading, trends
from emqd.http.actions import REVIVE_ALL_MAX
from emqd.http.cleaning import CLEAN_MAX
from emqd.http.context import Dashboard, found, job_url, query_bytes, segment
from emqd.http.rates import MINUTE_MS, MINUTES
from emqd.layout import split_job_key
from emqd.persist.aof import AppendOnlyFile
from emqd.serve.process_memory import rss_bytes

PAGE = 50  # jobs per page
PAGE_MAX = 10**9

NOTICES = {
    "paused": "The queue is paused: claims hand out nothing until it is resumed.",
    "resumed": "The queue is running again.",
    "revived": "The job is pending again.",
    "promoted": "The job is pending now.",
    "removed": "The job was removed.",
    "cancelled": "The job was cancelled: it will not run again, and a worker that holds it "
                 "is told at its next call about it.",
}

# What a state's score means, for the list's time column.
SCORE_MEANING = {"active": "lease until", "scheduled": "due", "dead": "died",
                 "completed": "finished", "waiting": "waiting since",
                 "cancelled": "cancelled"}

# The list pages' "token" column (the row's `attempts`): what its number is, since a job added
# under an explicit id starts above its queue's earlier tokens and shows 8 after one run.
TOKEN_HINT = ("the fencing token of the job's last claim (the row's attempts), one higher at "
              "each claim. It is not a count of runs: a job added under an explicit id starts "
              "above every token its queue issued before, so its first claim can show 8. "
              "– : not claimed yet.")

COUNTERS_EXPLAINED = {
    "attempts": "the fencing token: the last one issued, one higher at each claim (a job "
                 "added under an explicit id starts above every token its queue issued). "
                 "Every verb a worker sends about the job must present it; a holder with an "
                 "older token is refused (EMQSTALE).",
    "failures": "the retry budget spent: how many times EMQ.FAIL was called for it. At "
                 "max_attempts the job dies.",
    "stalled": "the stall budget spent: how often its lease ran out while the server that "
                "granted it was running (a worker that vanished). At max_stalled it dies.",
}


def _page_number(request: web.Request) -> int:
    number = parse_int(request.query.get("page", "1").encode())
    if number is None or not 1 <= number <= PAGE_MAX:
        raise web.HTTPBadRequest(reason="page must be a positive integer")
    return number


def _notice(request: web.Request) -> str | None:
    done = request.query.get("done")
    count = parse_int(request.query.get("n", "").encode())
    if done == "revived_all":
        return None if count is None else f"{count} dead letters are pending again."
    if done == "cleaned":
        left = parse_int(request.query.get("left", "").encode())
        if count is None or left is None:
            return None
        more = f" {left} older ones are left: clean again." if left else ""
        return f"{count} completed jobs were removed.{more}"
    return NOTICES.get(done or "")


async def _overview_context(request: web.Request, dashboard: Dashboard) -> dict[str, Any]:
    state = dashboard.core
    now = clock.now_ms()
    first_minute = now // MINUTE_MS - MINUTES + 1
    # The charts' figures are this process's own samples (rates.py): until it has run an
    # hour they cover only the time since it started, and say so.
    window = "in the last hour" if now - state.started_ms >= MINUTES * MINUTE_MS else \
        "since the start"
    listing = await _listing(request, dashboard, now)
    queues: list[tuple[cluster_queues.Row, present.Chart | None, present.Chart | None]] = []
    for row in listing.rows:
        figures = row.figures
        if not row.here:  # the owner's figures, on the queue's page (cluster_queues.py)
            queues.append((row, None, None))
            continue
        live = (figures.totals["completed"], figures.totals["failures"])
        completed, failed = dashboard.rates.series(figures.name, now, live)
        queues.append((row, present.chart(completed, first_minute),
                       present.chart(failed, first_minute)))
    sink = state.commit.sink
    server = {
        "clients": len(state.clients),
        "blocked": dashboard.blocked(),
        "memory": rss_bytes(),
        "aof": sink.size if isinstance(sink, AppendOnlyFile) else None,
        "uptime": present.span(now - state.started_ms),
        "run_id": state.run_id,
        "commands": state.stats.total_commands,
        "front": None if dashboard.front is None else dashboard.front.address.decode("latin-1"),
    }
    return {"queues": queues, "server": server, "states": reading.STATES, "window": window,
            "listing": listing, "port": state.config.port or state.config.tls_port,
            "tls": not state.config.port, "cluster_error": listing.error}


async def _listing(request: web.Request, dashboard: Dashboard, now: int) -> cluster_queues.Listing:
    """The queues the overview lists: the store's (single mode), or the cluster's registry,
    a page of it (cluster mode; the store's own when the cluster does not answer)."""
    keyspace = dashboard.core.keyspace
    front = dashboard.front
    if front is not None:
        page = _page_number(request)
        try:
            return await cluster_queues.listing(front, keyspace, page, now)
        except FAILED as exc:
            error: str | None = f"the cluster did not answer ({exc}): only the queues " \
                                f"this front owns are listed"
    else:
        error = None
    here = None if front is None else front.address.decode("latin-1")
    rows = [cluster_queues.Row(reading.queue_figures(keyspace, queue, now), here, True)
            for queue in reading.queue_names(keyspace)]
    return cluster_queues.Listing(len(rows), 1, 1, rows, error)


async def overview(request: web.Request) -> web.Response:
    """GET /: every queue, its counts, rates and latency; the server."""
    dashboard = Dashboard.of(request)
    return dashboard.render(request, "overview.html",
                            **await _overview_context(request, dashboard))


async def overview_live(request: web.Request) -> web.Response:
    """GET /live/overview: the part of / that refreshes itself (app.js swaps it in)."""
    dashboard = Dashboard.of(request)
    return dashboard.render(request, "overview_live.html",
                            **await _overview_context(request, dashboard))


async def queue_page(request: web.Request) -> web.Response:
    """GET /queues/<queue>: the jobs of one state, paged, newest first; searches."""
    dashboard = Dashboard.of(request)
    keyspace = dashboard.core.keyspace
    queue = found(request, keyspace)
    state = request.query.get("state", "pending")
    if state not in reading.STATES:
        raise web.HTTPBadRequest(reason=f"state must be one of {', '.join(reading.STATES)}")
    wanted_id = query_bytes(request, "id")
    if wanted_id:
        if reading.job_row(keyspace, queue, wanted_id) is not None:
            raise web.HTTPSeeOther(job_url(queue, wanted_id))
    needle = query_bytes(request, "q")
    page = _page_number(request)
    # Pending lists in the order claims take the jobs (priority, then arrival), so the
    # next to run is first; `order=newest` lists it newest first like the other states.
    order = request.query.get("order", "next" if state == "pending" else "newest")
    if order not in ("next", "newest") or (order == "next" and state != "pending"):
        raise web.HTTPBadRequest(reason="order must be next (pending only) or newest")
    window = request.query.get("history", trends.DEFAULT_WINDOW)
    if window not in trends.WINDOWS:
        raise web.HTTPBadRequest(reason=f"history must be one of {', '.join(trends.WINDOWS)}")
    now = clock.now_ms()
    figures = reading.queue_figures(keyspace, queue, now)
    context: dict[str, Any] = {
        "queue": queue, "figures": figures, "state": state, "states": reading.STATES,
        "notice": _notice(request), "wanted_id": wanted_id, "needle": needle,
        "meaning": SCORE_MEANING.get(state), "page": page, "search": None,
        "schedules": reading.schedules(keyspace, queue),
        "rate": reading.rate_limit(keyspace, queue), "order": order,
        "clean_max": CLEAN_MAX, "now": now, "token_hint": TOKEN_HINT,
        "trends": trends.charts(reading.history(keyspace, queue, 0, now), window, now),
        "window": window, "windows": list(trends.WINDOWS), "window_label": trends.window_label,
    }
    if needle:
        offset = parse_int(request.query.get("from", "0").encode())
        if offset is None or offset < 0:
            raise web.HTTPBadRequest(reason="from must be a non-negative integer")
        search = reading.search_payloads(keyspace, queue, state, needle, offset, PAGE)
        context.update(jobs=present.lines(search.jobs), total=None, pages=1, search=search,
                       offset=offset,
                       rows=reading.SEARCH_ROWS)
    else:
        total, jobs = reading.job_page(keyspace, queue, state, (page - 1) * PAGE, PAGE,
                                       lowest_first=order == "next")
        context.update(jobs=present.lines(jobs), total=total, pages=max(1, -(-total // PAGE)),
                       first=(page - 1) * PAGE)
    return dashboard.render(request, "queue.html", **context)


async def dead_page(request: web.Request) -> web.Response:
    """GET /queues/<queue>/dead: the dead letters with their last error, paged, newest first."""
    dashboard = Dashboard.of(request)
    keyspace = dashboard.core.keyspace
    queue = found(request, keyspace)
    page = _page_number(request)
    total, jobs = reading.job_page(keyspace, queue, "dead", (page - 1) * PAGE, PAGE)
    return dashboard.render(
        request, "dead.html", queue=queue, jobs=present.lines(jobs), total=total, page=page,
        pages=max(1, -(-total // PAGE)), notice=_notice(request), cap=REVIVE_ALL_MAX)


async def revive_all_confirm(request: web.Request) -> web.Response:
    """GET /queues/<queue>/dead/revive-all: what a "revive all" would do, and its button."""
    dashboard = Dashboard.of(request)
    queue = found(request, dashboard.core.keyspace)
    total, _ = reading.job_page(dashboard.core.keyspace, queue, "dead", 0, 0)
    return dashboard.render(request, "revive_all.html", queue=queue, total=total,
                            count=min(total, REVIVE_ALL_MAX), cap=REVIVE_ALL_MAX)


async def job_page(request: web.Request) -> web.Response:
    """GET /queues/<queue>/jobs/<id>: the row, explained, and the actions its state allows."""
    dashboard = Dashboard.of(request)
    keyspace = dashboard.core.keyspace
    queue = found(request, keyspace)
    job_id = segment(request, 3)
    row = reading.job_row(keyspace, queue, job_id) if job_id else None
    if row is None:
        raise web.HTTPNotFound(reason="no such job")
    state = present.shown(row.get(b"state"))
    lines, kept = reading.log_lines(keyspace, queue, job_id)
    return dashboard.render(
        request, "job.html", queue=queue, job_id=job_id, state=state,
        items=[(present.shown(field), _kind(field), value) for field, value in row.items()],
        present_fields={present.shown(field) for field in row},
        payload=present.payload(row.get(b"payload", b"")),
        # A finished job's score is its finished_ms, shown once, with the row's fields.
        score=None if b"finished_ms" in row else reading.job_score(keyspace, queue, state,
                                                                    job_id),
        meaning=SCORE_MEANING.get(state), explained=COUNTERS_EXPLAINED,
        progress=present.progress(row.get(b"progress")), log_lines=lines, log_kept=kept,
        log_shown=reading.LOG_LINES_SHOWN,
        notice=_notice(request), children=reading.children(keyspace, queue, job_id),
        parent=split_job_key(row.get(b"parent", b"")))


def _kind(field: bytes) -> str:
    """How the job page shows a field: the payload, a time, a counter, or as stored."""
    if field == b"payload":
        return "payload"
    if field.endswith(b"_ms"):
        return "time"
    return "counter" if field.decode("latin-1") in COUNTERS_EXPLAINED else "plain"


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics: the Prometheus exposition (OpenMetrics when the scraper asks for it)."""
    body, content_type = Dashboard.of(request).metrics.exposition(request.headers.get("Accept"))
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response
