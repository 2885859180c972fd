"""Refused passwords: counted for INFO and logged, at most a line an interval.

Every password refused (AUTH and HELLO ... AUTH answering WRONGPASS, and the
dashboard's basic auth when a wrong one was sent) is counted in INFO stats as
`acl_access_denied_auth`, Redis 7.2's name for the same count (its ACL LOG
keeps the entries; emqd has one user, so the count and the log say it all).
As in Redis 7.2, CONFIG RESETSTAT leaves it.

The log must show guessing without being flooded by it (50,000 guesses a
second on one connection are possible): the first refusal after a quiet
interval is logged at once, with where it came from; the ones that follow
within the interval are counted, and one line at its end says how many and
the last one's origin; an interval with none ends the spell.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger("emqd")

LOG_INTERVAL_S: Final = 10.0

Schedule = Callable[[float, Callable[[], None]], Any]  # loop.call_later's shape


def _call_later(delay: float, callback: Callable[[], None]) -> Any:
    """The running loop's call_later; None outside a loop (a planner test): every
    refusal is then logged on its own."""
    try:
        return asyncio.get_running_loop().call_later(delay, callback)
    except RuntimeError:
        return None


class AuthFailures:
    """The count and the rate-limited log of one server's refused passwords."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S,
                 schedule: Schedule = _call_later) -> None:
        self.interval_s = interval_s
        self._schedule = schedule
        self.total = 0  # INFO stats `acl_access_denied_auth`
        self._unlogged = 0  # refusals since the last line
        self._last_from = ""
        self._timer: Any = None  # the end of the current interval, while one runs

    def refused(self, origin: str) -> None:
        """A password refused; `origin` says who sent it (`client 127.0.0.1:5000`)."""
        self.total += 1
        if self._timer is not None:
            self._unlogged += 1
            self._last_from = origin
            return
        log.warning("refused a password from %s (INFO stats acl_access_denied_auth:%d)",
                    origin, self.total)
        self._timer = self._schedule(self.interval_s, self._interval_ended)

    def _interval_ended(self) -> None:
        self._timer = None
        if not self._unlogged:
            return
        log.warning("refused %d more password%s in the last %gs, the last from %s "
                    "(INFO stats acl_access_denied_auth:%d)", self._unlogged,
                    "" if self._unlogged == 1 else "s", self.interval_s, self._last_from,
                    self.total)
        self._unlogged = 0
        self._timer = self._schedule(self.interval_s, self._interval_ended)

    def info(self) -> dict[str, object]:
        return {"acl_access_denied_auth": self.total}
