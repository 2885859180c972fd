"""Time to live: keys in emqd never expire, and the commands say so as Redis would.

TTL / PTTL / EXPIRETIME / PEXPIRETIME key answer -1 for a key that exists
(Redis's "no expiry") and -2 for one that does not; PERSIST key answers 0
(there is no expiry to remove), whether or not the key exists. EXPIRE,
PEXPIRE, EXPIREAT and PEXPIREAT are refused with an error that says keys do
not expire here: a job's row, its lane or its queue's index going away on a
timer would lose jobs behind the verbs' backs, and the verbs keep their own
times (retention, leases, schedules). docs/SERVER.md says so.
"""

from __future__ import annotations

from typing import Final

from emqd import errors
from emqd.command import command
from emqd.core import Session
from emqd.reply import Reply

NO_EXPIRY: Final = -1
NO_KEY: Final = -2


def ttl(session: Session, argv: list[bytes]) -> Reply:
    """TTL / PTTL / EXPIRETIME / PEXPIRETIME key -> -1 (it never expires) or -2 (no key)."""
    return NO_EXPIRY if argv[1] in session.core.keyspace else NO_KEY


def persist(session: Session, argv: list[bytes]) -> Reply:
    """PERSIST key -> 0: no key has an expiry to remove."""
    return 0


def expire(session: Session, argv: list[bytes]) -> Reply:
    """EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT: refused, nothing is written."""
    raise errors.no_expiry(argv[0].decode("latin-1"))


_GROUP: Final = "generic"
COMMANDS: Final = [
    command("ttl", 2, "readonly fast", ttl, (1, 1, 1), group=_GROUP,
            summary="Returns the expiration time in seconds of a key."),
    command("pttl", 2, "readonly fast", ttl, (1, 1, 1), group=_GROUP,
            summary="Returns the expiration time in milliseconds of a key."),
    command("expiretime", 2, "readonly fast", ttl, (1, 1, 1), group=_GROUP,
            summary="Returns the expiration time of a key as a Unix timestamp."),
    command("pexpiretime", 2, "readonly fast", ttl, (1, 1, 1), group=_GROUP,
            summary="Returns the expiration time of a key as a Unix milliseconds timestamp."),
    command("persist", 2, "write fast", persist, (1, 1, 1), group=_GROUP,
            summary="Removes the expiration time of a key."),
    command("expire", -3, "write fast", expire, (1, 1, 1), group=_GROUP,
            summary="Sets the expiration time of a key in seconds."),
    command("pexpire", -3, "write fast", expire, (1, 1, 1), group=_GROUP,
            summary="Sets the expiration time of a key in milliseconds."),
    command("expireat", -3, "write fast", expire, (1, 1, 1), group=_GROUP,
            summary="Sets the expiration time of a key to a Unix timestamp."),
    command("pexpireat", -3, "write fast", expire, (1, 1, 1), group=_GROUP,
            summary="Sets the expiration time of a key to a Unix milliseconds timestamp."),
]
