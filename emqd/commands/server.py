"""Server commands: SHUTDOWN (INFO, CONFIG, CLIENT, COMMAND, TIME to come)."""

from __future__ import annotations

from typing import Any

from emqd.command import command
from emqd.session import Session


def shutdown(session: Session, argv: list[bytes]) -> Any:
    request = session.server.shutdown_requested
    if request is not None:
        request()
    return "OK"


COMMANDS = [
    command("shutdown", -1, "admin noscript loading stale no_multi sentinel allow_busy", shutdown,
            group="server"),
]
