"""EMQ.OWNER queue
EMQ.FRONT <CHALLENGE | address [PROOF proof]>
EMQ.FRONTS

Which front serves a queue (cluster mode, docs/CLUSTER.md). EMQ.OWNER answers
the address (`HOST:PORT`) of the front that owns the queue, without taking
anything: the owner answers its own address, any other front the owner's (or,
when nobody owns it, the address of the live front it belongs to), so a client
can connect there and skip the forwarding hop; a single process answers its
own address.

EMQ.FRONTS answers the addresses of the live fronts, this front's own first (as
EMQ.OWNER names it), so that a client given one front's address learns the
others, and which of them it reached: when its front dies, it goes on through
another (emqd/client/routes.py). A single process answers one address: the one
this connection reached (its own side of the connection, `HOST:PORT`, or a Unix
socket's path), not `--bind`, which may be `0.0.0.0` and reached by no client.
One address tells a client that there is nowhere else to go.

`EMQ.FRONT ADDRESS` is what a front sends first on a connection it forwards
its clients' requests on, naming the front it means to reach: only a front of
a cluster at that address says OK (a port another process took since is
refused), and a request that comes that way is never forwarded again
(emqd/cluster/router.py). Where the fronts have a password (`--requirepass`,
shared by all of them), a front proves it knows it without sending it: it asks
`EMQ.FRONT CHALLENGE` (a random nonce, kept by the connection), then sends
`EMQ.FRONT ADDRESS PROOF hex(HMAC-SHA256(password, nonce " " ADDRESS))`, which
also authenticates the connection; a wrong proof is refused as a wrong
password is (counted, logged), and the nonce is spent either way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from emqd import errors
from emqd.cluster.names import front_address
from emqd.command import command
from emqd.core import Session
from emqd.errors import Refusal
from emqd.reply import Reply


def owner(session: Session, argv: list[bytes]) -> Reply:
    return front_address(session.core.config)


def fronts(session: Session, argv: list[bytes]) -> Reply:
    router = session.core.router
    if router is None:
        return [session.laddr.encode() or front_address(session.core.config)]
    return router.peers()


def front(session: Session, argv: list[bytes]) -> Reply:
    config = session.core.config
    if len(argv) == 2 and argv[1].upper() == b"CHALLENGE":
        session.challenge = secrets.token_hex(16).encode()
        return session.challenge
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2].upper() != b"PROOF"):
        raise errors.SYNTAX()
    if not config.cluster or argv[1] != front_address(config):
        raise NOT_THAT_FRONT()
    if config.requirepass:
        nonce, session.challenge = session.challenge, b""
        if len(argv) != 4 or not nonce or not hmac.compare_digest(
                argv[3], proof(config.requirepass, nonce, argv[1])):
            session.core.stats.auth_failures.refused("front " + session.addr)
            raise NOT_PROVEN()
        session.authenticated = True
    elif not session.authenticated:
        raise errors.NOAUTH()
    session.forwarded = True
    return "OK"


def proof(password: str, nonce: bytes, address: bytes) -> bytes:
    """What a front that knows the password answers to `nonce` (hex HMAC-SHA256)."""
    return hmac.new(password.encode(), nonce + b" " + address, hashlib.sha256).hexdigest().encode()


NOT_THAT_FRONT = Refusal("ERR this is not that front of a cluster")
NOT_PROVEN = Refusal(
    "WRONGPASS a front proves it knows the fronts' password: EMQ.FRONT CHALLENGE, then "
    "EMQ.FRONT address PROOF hex(HMAC-SHA256(password, nonce + ' ' + address))")


COMMANDS = [
    command("emq.owner", 2, "readonly fast", owner, (1, 1, 1), group="emq",
            summary="The address of the front that owns the queue"),
    command("emq.front", -2, "admin fast no_auth", front, group="emq",
            summary="Marks a connection a front forwards its clients' requests on"),
    command("emq.fronts", 1, "readonly fast", fronts, group="emq",
            summary="The live fronts' addresses, this one's first"),
]
