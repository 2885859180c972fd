"""An emqd state in this process, driven through the dispatcher as a client would drive it."""

from __future__ import annotations

from typing import Any

from emqd import dispatch
from emqd.config import Config
from emqd.core import Core, Session


class Local:
    """A Core and one session on it: `run("EMQ.ADD", "q", "p")` is one command."""

    def __init__(self, **settings: Any) -> None:
        self.state = Core(Config(appendonly=False, **settings))
        self.session = Session(self.state)

    def run(self, *argv: str | bytes | int) -> Any:
        return dispatch.execute(self.session, [
            a if isinstance(a, bytes) else str(a).encode() for a in argv])

    @property
    def keyspace(self):  # type: ignore[no-untyped-def]
        return self.state.keyspace
