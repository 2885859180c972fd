"""File descriptors: room for `maxclients` clients and for emqd itself, as Redis makes it.

Every client holds a descriptor, and so do the log, its directory's lock, a
compaction's new file, the everysec thread's copy of the log's, the
listening sockets, the event loop's own, and the HTTP side's connections. If
clients could take them all, the log could not be compacted (BGREWRITEAOF
failed with EMFILE) and the next client would be dropped unanswered.

So at start (`fit`, Redis's adjustOpenFilesLimit) emqd raises the soft
RLIMIT_NOFILE to `maxclients + reserve(config)`, where the reserve is
Redis's 32 plus the HTTP side's own cap (`--http-maxclients`); when the hard
limit does not allow it, `maxclients` is lowered to fit, with Redis's
warning, and a limit too low for even one client stops the start. CONFIG SET
maxclients raises the limit the same way or is refused with Redis's words
(`make_room`). Clients past `maxclients` are then answered by the acceptor
(emqd/serve/accept.py), which always has a descriptor to do it with.
"""

from __future__ import annotations

import dataclasses
import logging
import resource
from typing import Final

from emqd.config import Config

log = logging.getLogger("emqd")

RESERVED_FDS: Final = 32  # Redis's CONFIG_MIN_RESERVED_FDS: the log, the loop, listeners, ...


def reserve(config: Config) -> int:
    """The descriptors kept from clients: Redis's 32, and the HTTP side's connections."""
    return RESERVED_FDS + (config.http_maxclients if config.http_port else 0)


def _needed(maxclients: int, spare: int) -> int:
    """maxclients + the reserve, in Redis's unsigned 32-bit arithmetic: a maxclients within
    the reserve of 2^32 wraps to a small need and is taken as is, as Redis 7.0 takes
    `CONFIG SET maxclients 4294967295` (clients past the limit are still answered:
    emqd/serve/accept.py)."""
    return (maxclients + spare) % 2**32


def _raise_to(wanted: int) -> int:
    """Raise the soft limit towards `wanted` (never the hard one); the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit to %d: %s", target, exc)
    return soft


def fit(config: Config) -> Config:
    """The config with `maxclients` that the descriptors allow, the soft limit raised for
    it; raises OSError when not even one client fits."""
    spare = reserve(config)
    wanted = _needed(config.maxclients, spare)
    limit = _raise_to(wanted)
    if limit >= wanted:
        return config
    if limit <= spare:
        raise OSError(f"the open files limit (ulimit -n) of {limit} is not enough for emqd "
                      f"to start: it keeps {spare} for itself; raise it to at least "
                      f"{wanted}")
    log.warning("maxclients %d needs at least %d open files, but the limit (ulimit -n) is "
                "%d: maxclients lowered to %d, since emqd keeps %d for itself (the log, "
                "compaction, the HTTP side); raise 'ulimit -n' for more clients",
                config.maxclients, wanted, limit, limit - spare, spare)
    return dataclasses.replace(config, maxclients=limit - spare)


def make_room(maxclients: int, config: Config) -> int | None:
    """CONFIG SET maxclients: None when the limit holds that many clients (raised if need
    be), else the most it can hold (Redis's `try with N`)."""
    spare = reserve(config)
    wanted = _needed(maxclients, spare)
    return None if _raise_to(wanted) >= wanted else max(_raise_to(wanted) - spare, 1)
