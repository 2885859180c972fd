"""The dashboard's buttons: each one is an EMQ verb, run like any client's.

A POST builds the verb's argv and hands it to the dispatcher on a server-side
`Session` (the HTTP side has checked the password already), so the action is
parsed, fenced, planned, applied, kept and counted exactly as the same command
from redis-cli would be. Then, as a connection does after its batch: parked
claimers are woken (a revived job is claimable at once), and the response
leaves once the commit path says the sink holds the action durably (the file
written, and under `--appendfsync always` fsynced), so a page never shows an
action that a crash could lose.

A verb's refusal (`EMQSTATE job is not dead`: someone was faster) is shown as
a page with the verb's own text, status 409. Success answers 303 to the page
the button was on, with a `done` code the page turns into a sentence.
"""

from __future__ import annotations

from typing import Any

import hiredis
from aiohttp import web

from emqd import dispatch
from emqd.commit.plan import AGAIN, Later
from emqd.compat.numbers import parse_int
from emqd.core import Session
from emqd.errors import ReplyError
from emqd.http import reading
from emqd.http.context import Dashboard, found, job_url, queue_url, segment
from emqd.reply import Raw
from emqd.sessions import worker_name

REVIVE_ALL_MAX = 1000  # dead letters one "revive all" click revives, at most


async def run_verbs(dashboard: Dashboard, argvs: list[list[bytes]]) -> list[Any]:
    """EMQ verbs through the dispatcher, then woken and kept as a connection's batch is.

    The response is this side's reply: it leaves once the sink holds the
    actions durably, as a connection's would. A disk that refuses them now
    answers 503: they are applied and will be in the file once the disk takes
    it (the commit path retries), like a held reply.
    """
    core = dashboard.core
    session = Session(core, addr="http")
    session.authenticated = True
    try:
        replies = [await _answer(session, argv) for argv in argvs]
    finally:
        if core.router is not None:  # its links to other fronts close, as a client's do
            core.router.forget(session)
    dashboard.wake()
    commit = core.commit
    if session.log_mark > commit.sink.durable:
        commit.flush()  # the file's write (and fsync) now, as at the end of the iteration
        if session.log_mark > commit.sink.durable:
            if commit.sink.failing is not None:
                raise web.HTTPServiceUnavailable(
                    text=f"the log cannot be written ({commit.sink.failing}); the action is "
                         "applied and waits for the disk")
            waiting = commit.durable_at(session.log_mark)
            if waiting is not None and not await waiting:  # a sink that acknowledges later
                raise web.HTTPServiceUnavailable(
                    text="the cluster did not acknowledge the action (its queue moved, or a "
                         "failover); look at the queue again and retry")
    return replies


async def _answer(session: Session, argv: list[bytes]) -> Any:
    """One verb's reply. In cluster mode a verb of a queue another front owns is answered
    there (the router's `Later`: its reply's bytes, an error read back as a ReplyError),
    or runs here once this front took the queue (AGAIN), as a connection's would."""
    reply = dispatch.execute(session, argv)
    while isinstance(reply, Later):
        reply = await reply.future
        if reply is AGAIN:
            reply = dispatch.execute(session, argv)
    if isinstance(reply, Raw):  # another front's reply, as it sent it: read back as a value
        reader = hiredis.Reader()
        reader.feed(reply.data)
        value = reader.gets()
        return ReplyError(str(value)) if isinstance(value, hiredis.ReplyError) else value
    return reply


async def run_verb(dashboard: Dashboard, argv: list[bytes]) -> Any:
    return (await run_verbs(dashboard, [argv]))[0]


def _refused(dashboard: Dashboard, request: web.Request, argv: list[bytes],
             error: ReplyError) -> web.Response:
    back = "/workers" if argv[0] == b"EMQ.WORKER" else queue_url(argv[1])
    return dashboard.render(request, "refused.html", status=409, command=b" ".join(argv),
                            message=error.message, back=back)


def _back(request: web.Request, queue: bytes, job_id: bytes | None, form: Any,
          done: str) -> web.Response:
    """303 to the page the form came from (named by its `back` field, never a URL)."""
    back = form.get("back")
    if back == "dead":
        url = queue_url(queue, "/dead?")
    elif back == "job" and job_id is not None:
        url = job_url(queue, job_id, "?")
    elif back == "active":  # the active tab's row buttons
        url = queue_url(queue, "?state=active&")
    else:
        url = queue_url(queue, "?")
    raise web.HTTPSeeOther(f"{url}done={done}")


async def steer(request: web.Request) -> web.Response:
    """POST /queues/{queue}/pause and /resume."""
    dashboard = Dashboard.of(request)
    queue = found(request, dashboard.core.keyspace)
    verb = segment(request, 2)
    argv = [b"EMQ." + verb.upper(), queue]
    reply = await run_verb(dashboard, argv)
    if isinstance(reply, ReplyError):
        return _refused(dashboard, request, argv, reply)
    return _back(request, queue, None, await request.post(), verb.decode() + "d")


_JOB_VERBS = {b"revive": b"EMQ.REVIVE", b"promote": b"EMQ.PROMOTE", b"remove": b"EMQ.REMOVE",
              b"cancel": b"EMQ.CANCEL"}
_DONE = {b"revive": "revived", b"promote": "promoted", b"remove": "removed",
         b"cancel": "cancelled"}
# What a job cancelled here tells its worker (EMQCANCELLED job was cancelled: ...).
CANCEL_REASON = b"cancelled from the dashboard"


async def job_action(request: web.Request) -> web.Response:
    """POST /queues/{queue}/jobs/{id}/revive, /promote, /remove, /cancel."""
    dashboard = Dashboard.of(request)
    queue = found(request, dashboard.core.keyspace)
    job_id = segment(request, 3)
    action = segment(request, 4)
    form = await request.post()
    argv = [_JOB_VERBS[action], queue]
    if action == b"promote":
        argv += [b"ID", job_id]
    else:
        argv.append(job_id)
    if action == b"revive" and form.get("reset"):
        argv.append(b"RESET")
    if action == b"cancel":
        argv += [b"REASON", CANCEL_REASON]
    reply = await run_verb(dashboard, argv)
    if isinstance(reply, ReplyError):
        return _refused(dashboard, request, argv, reply)
    if action == b"promote" and reply == 0:
        return _refused(dashboard, request, argv, ReplyError("the job is not scheduled"))
    if action in (b"remove", b"cancel") and reply in (0, None):
        return _refused(dashboard, request, argv, ReplyError("there is no such job"))
    if action == b"remove":
        if form.get("back") == "job":  # its page is gone
            raise web.HTTPSeeOther(queue_url(queue) + "?done=removed")
    return _back(request, queue, job_id, form, _DONE[action])


async def order_worker(request: web.Request) -> web.Response:
    """POST /workers/quiet, /stop, /run: EMQ.WORKER for each queue the worker's name lists.

    The worker is named by the form (its connections' name, the worker form of
    emqd/sessions/worker_name.py); a name not in that form names no queue, and is a 400.
    """
    dashboard = Dashboard.of(request)
    order = segment(request, 1)
    form = await request.post()
    name = str(form.get("name", ""))
    known = worker_name.parse(name)
    if known is None or not known.queues:
        raise web.HTTPBadRequest(reason="name a worker of the form emqd-worker?...&queue=...")
    argvs = [[b"EMQ.WORKER", queue.encode(), order.upper(), name.encode()]
             for queue in known.queues]
    for argv, reply in zip(argvs, await run_verbs(dashboard, argvs), strict=True):
        if isinstance(reply, ReplyError):
            return _refused(dashboard, request, argv, reply)
    raise web.HTTPSeeOther(f"/workers?done={order.decode()}")


async def revive_all(request: web.Request) -> web.Response:
    """POST /queues/{queue}/dead/revive-all: the oldest `count` dead letters (at most the cap).

    `count` is the number the confirmation page showed, so a click never
    revives more than its user agreed to, even if more died meanwhile.
    """
    dashboard = Dashboard.of(request)
    queue = found(request, dashboard.core.keyspace)
    form = await request.post()
    count = parse_int(str(form.get("count", "")).encode())
    if form.get("confirm") != "yes" or count is None or not 0 < count <= REVIVE_ALL_MAX:
        raise web.HTTPSeeOther(queue_url(queue, "/dead/revive-all"))
    reset = [b"RESET"] if form.get("reset") else []
    ids = reading.oldest(dashboard.core.keyspace, queue, "dead", count)
    replies = await run_verbs(dashboard,
                              [[b"EMQ.REVIVE", queue, job_id, *reset] for job_id in ids])
    revived = sum(1 for reply in replies if reply == "OK")
    raise web.HTTPSeeOther(queue_url(queue, "/dead") + f"?done=revived_all&n={revived}")
