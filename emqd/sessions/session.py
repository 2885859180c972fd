"""One client's state, as commands see it: protocol version, auth, MULTI, name, Pub/Sub.

No sockets here: the connection protocol owns one `Session` and hands it to
the dispatcher with every request, so commands can be run and tested without
a network.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from emqd.core import Core
    from emqd.sessions.pubsub import Subscriptions

_ids: Final = itertools.count(1)


class Session:
    __slots__ = (
        "core",
        "id",
        "resp",
        "authenticated",
        "name",
        "lib_name",
        "lib_ver",
        "multi",
        "multi_error",
        "in_exec",
        "waking",
        "addr",
        "laddr",
        "created_ms",
        "last_ms",
        "last_command",
        "close_after_reply",
        "log_mark",
        "tells",
        "pubsub",
        "forwarded",
        "challenge",
    )

    def __init__(self, core: Core, addr: str = "", laddr: str = "") -> None:
        self.core = core
        self.id = next(_ids)
        self.lib_name = b""
        self.lib_ver = b""
        self.in_exec = False  # blocking commands do not block inside EXEC
        self.waking = False  # its parked request runs again (a watched key was written)
        self.addr = addr
        self.laddr = laddr
        self.created_ms = 0
        self.last_ms = 0  # when the last command arrived (CLIENT LIST idle=)
        self.last_command = "NULL"  # its full name (CLIENT LIST cmd=)
        self.close_after_reply = False  # QUIT
        # The sink's `appended` after this client's last write: its replies wait for it
        # (emqd/commit/path.py `send`).
        self.log_mark = 0
        # The record the reply to the request being run tells of (0: none): its own
        # write's, or in cluster mode the newest of its queue's (emqd/commit/path.py, the
        # rule). Set by the connection before each request, then by the commit
        # (dispatch.py) and the cluster's router.
        self.tells = 0
        # Its channels and patterns while it listens to any (emqd/sessions/pubsub.py);
        # None for every other client, which is all the dispatcher tests.
        self.pubsub: Subscriptions | None = None
        # Cluster mode: another front forwards its clients' requests on this connection
        # (EMQ.FRONT); they are never forwarded on (emqd/cluster/router.py).
        self.forwarded = False
        self.challenge = b""  # the nonce of its EMQ.FRONT CHALLENGE (emqd/commands/fronts.py)
        self.reset()

    def reset(self) -> None:
        """A fresh connection's state (RESET): RESP2, no name, no MULTI, password owed."""
        self.resp = 2
        self.authenticated = not self.core.config.requirepass
        self.name = b""
        self.multi: list[list[bytes]] | None = None  # queued commands while in MULTI
        self.multi_error = False  # a queued command was refused: EXEC aborts
