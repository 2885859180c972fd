"""Cleaning: remove the completed jobs that finished more than a given age ago.

What Sidekiq Web and bull-board offer beside a queue's finished jobs. Each
removal is `EMQ.REMOVE q id`, run like the dashboard's other buttons
(actions.run_verbs: planned, applied, logged, counted as from redis-cli), for
the oldest completed jobs first. One click removes at most CLEAN_MAX (the
removals run back to back on the loop, like "revive all"); the page says how
many older ones are left, and another click goes on. For a standing rule, the
queue's `keep_completed_ms` setting (EMQ.CONFIG) trims by age on its own.
"""

from __future__ import annotations

from aiohttp import web

from emqd import clock
from emqd.compat.numbers import parse_int
from emqd.http import reading
from emqd.http.actions import run_verbs
from emqd.http.context import Dashboard, found, queue_url

CLEAN_MAX = 1000  # completed jobs one click removes, at most
UNITS = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
AGE_MAX_MS = 10 * 365 * 86_400_000


def age_ms(age: object, unit: object) -> int | None:
    """The form's age in ms (a non-negative integer of minutes, hours or days), or None."""
    number = parse_int(str(age).encode())
    per = UNITS.get(str(unit))
    if number is None or per is None or number < 0 or number * per > AGE_MAX_MS:
        return None
    return number * per


async def clean_completed(request: web.Request) -> web.Response:
    """POST /queues/{queue}/completed/clean: `age` and `unit`, and the `confirm` box."""
    dashboard = Dashboard.of(request)
    keyspace = dashboard.core.keyspace
    queue = found(request, keyspace)
    form = await request.post()
    older = age_ms(form.get("age", ""), form.get("unit", ""))
    if older is None:
        raise web.HTTPBadRequest(reason="the age must be a whole number of minutes, hours or "
                                        "days, at most ten years")
    back = queue_url(queue) + "?state=completed"
    if form.get("confirm") != "yes":
        raise web.HTTPSeeOther(back)
    cutoff = clock.now_ms() - older
    ids, _ = reading.scored_before(keyspace, queue, "completed", cutoff, CLEAN_MAX)
    replies = await run_verbs(dashboard, [[b"EMQ.REMOVE", queue, job_id] for job_id in ids])
    removed = sum(1 for reply in replies if reply == 1)
    _, left = reading.scored_before(keyspace, queue, "completed", cutoff, 0)
    raise web.HTTPSeeOther(f"{back}&done=cleaned&n={removed}&left={left}")
