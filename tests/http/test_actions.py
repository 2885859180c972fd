"""The dashboard's actions run their verbs as a client's request runs (emqd/http/actions.py):
in cluster mode a verb of a queue another front owns comes back as the router's `Later`,
whose reply (another front's bytes) is awaited and read back, or AGAIN, run here."""

from __future__ import annotations

import asyncio
from typing import Any

from emqd.commit.plan import AGAIN, Later
from emqd.config import Config
from emqd.core import Core, Session
from emqd.errors import ReplyError
from emqd.http.actions import _answer, run_verbs
from emqd.http.context import Dashboard
from emqd.reply import Raw


class Elsewhere:
    """A router that sends EMQ verbs elsewhere: each one answered by `replies`, in turn."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.routed: list[list[bytes]] = []
        self.forgotten: list[Session] = []  # sessions whose links to other fronts closed

    def route(self, session: Session, row: Any, argv: list[bytes]) -> Any:
        if not argv[0].upper().startswith(b"EMQ.") or not self.replies:
            return None  # here
        self.routed.append(argv)
        future = asyncio.get_running_loop().create_future()
        future.set_result(self.replies.pop(0))
        return Later(future)

    def forget(self, session: Session) -> None:
        self.forgotten.append(session)


def answered(replies: list[Any], argv: list[bytes]) -> tuple[Any, Elsewhere, Core]:
    router = Elsewhere(replies)
    core = Core(Config(appendonly=False), router=router)
    session = Session(core, addr="http")
    session.authenticated = True
    return asyncio.run(_answer(session, argv)), router, core


def test_another_fronts_reply_is_read_back_as_a_value() -> None:
    argv = [b"EMQ.WORKER", b"q", b"QUIET", b"w"]
    assert answered([Raw(b"+OK\r\n")], argv)[0] == b"OK"
    assert answered([Raw(b"$-1\r\n")], [b"EMQ.CANCEL", b"q", b"9"])[0] is None
    refused = answered([Raw(b"-EMQSTATE job is cancelled\r\n")], [b"EMQ.CANCEL", b"q", b"1"])[0]
    assert refused == ReplyError(b"EMQSTATE job is cancelled")


def test_again_runs_the_verb_here_once_the_front_took_the_queue() -> None:
    reply, router, core = answered([AGAIN], [b"EMQ.WORKER", b"q", b"STOP", b"w"])
    assert reply == "OK" and len(router.routed) == 1
    assert core.keyspace.hash(b"emq:{q}:workers") is not None  # applied here


def test_an_actions_session_is_forgotten_so_its_links_to_other_fronts_close() -> None:
    """Each action runs on a session of its own: a verb forwarded for it opened a link to
    the owner, which the router closes once told the session is done, as for a client."""
    router = Elsewhere([Raw(b"+OK\r\n")])
    core = Core(Config(appendonly=False), router=router)
    dashboard = Dashboard(core, lambda: 0, lambda: None)
    replies = asyncio.run(run_verbs(dashboard, [[b"EMQ.WORKER", b"q", b"QUIET", b"w"]]))
    assert replies == [b"OK"] and len(router.routed) == 1
    assert len(router.forgotten) == 1 and router.forgotten[0].addr == "http"
