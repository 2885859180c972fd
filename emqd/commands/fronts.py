"""EMQ.OWNER queue
EMQ.FRONT address

Which front serves a queue (cluster mode, docs/CLUSTER.md). EMQ.OWNER answers
the address (`HOST:PORT`) of the front that owns the queue: in cluster mode the
request is routed like any of the queue's (run by the owner, which answers its
own address, taking the queue first if nobody owns it), so a client can connect
to the owner and skip the forwarding hop; a single process answers its own
address. `EMQ.FRONT ADDRESS` is what a front sends first on a connection it
forwards its clients' requests on, naming the front it means to reach: only a
front of a cluster at that address says OK (a port another process took since
is refused), and a request that comes that way is never forwarded again
(emqd/cluster/router.py).
"""

from __future__ import annotations

from typing import Any

from emqd.cluster.names import front_address
from emqd.command import command
from emqd.errors import Refusal
from emqd.session import Session


def owner(session: Session, argv: list[bytes]) -> Any:
    return front_address(session.core.config)


def front(session: Session, argv: list[bytes]) -> Any:
    config = session.core.config
    if not config.cluster or argv[1] != front_address(config):
        raise NOT_THAT_FRONT()
    session.forwarded = True
    return "OK"


NOT_THAT_FRONT = Refusal("ERR this is not that front of a cluster")


COMMANDS = [
    command("emq.owner", 2, "readonly fast", owner, (1, 1, 1), group="emq",
            summary="The address of the front that owns the queue"),
    command("emq.front", 2, "admin fast", front, group="emq",
            summary="Marks a connection a front forwards its clients' requests on"),
]
