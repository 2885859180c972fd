"""Riding out a lost server: how long to wait before trying again (`Backoff`), and what to
log about it (`Outage`). Shared by the Worker (every part of it), the queue's retried
operations and `Queue.events()`, so that every reconnect in the client backs off and
reports alike."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from emqd.client.errors import TRANSPORT_ERRORS


class Backoff:
    """Reconnect delays: doubling from `first_s` up to `max_s`, reset on success."""

    def __init__(self, first_s: float = 0.05, max_s: float = 2.0) -> None:
        self.first_s, self.max_s = first_s, max_s
        self.current = 0.0

    def next(self) -> float:
        self.current = min(self.max_s, self.current * 2 if self.current else self.first_s)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


class Outage:
    """One WARNING when the server is lost and one when it answers again.

    Every part of a worker (the claimer, each job's heartbeat, report and settling
    verb) meets the same outage, each retrying on its own backoff: logged per retry,
    a 3 s restart with a hundred jobs running printed a hundred lines. Each retry is
    now a DEBUG line; the outage itself is two WARNINGs, whoever saw it first and
    whoever got through first.

    `on_lost` runs when an outage begins: the owner closes its pool's idle
    connections, which lead to a server process that may be gone, so that the first
    calls once it is back do not meet them one by one (each a "connection closed"
    and a second outage).
    """

    def __init__(self, log: logging.Logger, what: str,
                 on_lost: Callable[[], None] | None = None) -> None:
        self.log = log
        self.what = what
        self.on_lost = on_lost
        self.since: float | None = None  # monotonic time of the first failure

    def failed(self, part: str, error: BaseException, retry_in_s: float | None = None) -> None:
        """A call failed for want of the server (or a "not now" refusal)."""
        later = "" if retry_in_s is None else f"; retrying in {retry_in_s:.2f} s"
        if self.since is None:
            self.since = time.monotonic()
            self.log.warning("%s: %s (%s: %s); retrying until it is back", self.what,
                             _kind(error), type(error).__name__, error)
            if self.on_lost is not None and isinstance(error, TRANSPORT_ERRORS):
                self.on_lost()
        self.log.debug("%s: %s (%s)%s", part, _kind(error), error, later)

    def answered(self) -> None:
        """A call got through: ends the outage, if there was one."""
        if self.since is not None:
            lasted = time.monotonic() - self.since
            self.since = None
            self.log.warning("%s: the server answers again (connection back after %.1f s)",
                             self.what, lasted)


def _kind(error: BaseException) -> str:
    return "connection lost" if isinstance(error, TRANSPORT_ERRORS) else "refused for now"


class Patience:
    """How long one `Retried` batch is sent again: backing off from its first failure
    until `limit_s` have passed, the outage logged once (`Outage`)."""

    def __init__(self, limit_s: float, outage: Outage) -> None:
        self.limit_s = limit_s
        self.outage = outage
        self.backoff = Backoff()
        self.gives_up: float | None = None

    def retry_in(self, error: BaseException) -> float | None:
        """The delay before the next try, or None once the patience is spent."""
        now = time.monotonic()
        if self.gives_up is None:
            self.gives_up = now + self.limit_s
        if now >= self.gives_up:
            return None
        delay = min(self.backoff.next(), self.gives_up - now)
        self.outage.failed("retried batch", error, delay)
        return delay
