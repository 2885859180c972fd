"""Which front a queue's requests go to: its owner, learnt from the fronts, else any that
answers.

In cluster mode one front owns a queue at a time, and any front accepts any request
and forwards it to the owner, which costs a hop (docs/CLUSTER.md). `Routes` is what
one queue's client knows of the fronts, with no socket of its own: its drivers
(queue.py for `Queue` and `SyncQueue`, link.py for the Worker) ask it where to send
(`route`, `step`) and tell it how that went (`looked`, `answered`, `failed`,
`refused`). The rules:

- **The look** is `EMQ.FRONTS` (the live fronts, the one asked first) and `EMQ.OWNER
  queue`, pipelined. A front is asked it alone before anything else goes there, the
  first time and after its connection failed (a probe): a front that cannot be
  reached then costs a connection attempt, never a request, so no request is sent
  twice by moving (a CLAIM never is; an ADD only as its Retried rule says). Later
  looks go along with a request: every LOOK_S to the owner, every FALLBACK_S to
  another front, and at once after a refusal that says "not now" (TRYAGAIN,
  CLUSTERDOWN: the owner may have moved, or be moving).
- **Where**: the owner, once known and while not down; else the front that last
  answered a look (it forwards); else any live front or URL given that is not down;
  else, every one down, the first URL given, where the request fails as it did
  before there were routes (and the caller's retry rules apply).
- **Down**: a front whose connection failed is passed over for DOWN_S, then tried
  again (a probe first).
- **Single**: when the look names one front (a single process, a cluster of one),
  or the server does not know EMQ.FRONTS, or the URL is a Unix socket, there is
  nowhere else to go: requests go to the URLs given, as they always did, and the
  look is made again every SINGLE_S (a cluster of one may grow).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, NamedTuple

from emqd.client.addresses import address, at
from emqd.client.commands import Command
from emqd.client.errors import is_permanent

LOOK_S = 5.0  # at the owner: the owner is asked again this often (a queue handed over)
FALLBACK_S = 0.5  # forwarding through another front: the owner is asked again this often
SINGLE_S = 60.0  # one front: the fronts are asked again this often (a cluster may grow)
DOWN_S = 5.0  # a front whose connection failed is passed over this long
PROBES = 8  # fronts probed for one request, at most (each one is reached or passed over)


class Step(NamedTuple):
    """Where the next request goes; `probe`: ask the look alone there first; `look`: send
    the look along with the request."""

    url: str
    probe: bool
    look: bool


#: Yields the URL to probe (its driver sends `Routes.look` there alone), receives the
#: replies or the error raised, returns where the request goes.
Routing = Generator[str, "list[Any] | BaseException", Step]


class Routes:
    """One queue's view of the fronts (see the module's docstring). `seeds`: the URLs
    given, at least one; `queue`: the queue's name as EMQ.OWNER takes it."""

    def __init__(self, seeds: Sequence[str], queue: bytes) -> None:
        self.seeds = list(seeds)
        self.look: list[Command] = [("EMQ.FRONTS",), ("EMQ.OWNER", queue)]
        # Each front's address -> the URL it is reached by (those given, to begin with).
        self.urls = {found: url for url in self.seeds if (found := address(url))}
        self.fronts: list[str] = []  # the live fronts' URLs, as the last look said
        self.owner: str | None = None  # the owner's URL (when there are several fronts)
        self.home: str | None = None  # the URL that answered the last look
        self.reached: set[str] = set()  # URLs answered since their last failure
        self.down: dict[str, float] = {}  # URL -> until when it is passed over
        self.several = False  # the last look named more than one front
        self.look_at = 0.0  # when the next look is due (monotonic s)
        self.changes = 0  # counts what may have moved `step`'s answer (link.py's lines)

    # --- where -------------------------------------------------------------------------
    def step(self, now: float) -> Step:
        url = self._where(now)
        if url is None:
            return Step(self.seeds[0], False, False)  # nowhere up: as before there were routes
        if url not in self.reached:
            return Step(url, True, True)
        return Step(url, False, now >= self.look_at)

    def route(self, now: float) -> Routing:
        """Where the next request goes, after the probes it needs: the driver sends the
        look to each URL yielded, and sends back its replies or the error it raised."""
        for _ in range(PROBES):
            step = self.step(now)
            if not step.probe:
                return step
            said = yield step.url
            if isinstance(said, BaseException):
                self.unreached(step.url, said, now)
            else:
                self.looked(step.url, said, now)
        return self.step(now)._replace(probe=False)

    def _where(self, now: float) -> str | None:
        if self.several and self.owner is not None and self._up(self.owner, now):
            return self.owner
        for url in (self.home, *self.fronts, *self.seeds):
            if url is not None and self._up(url, now):
                return url
        return None

    def _up(self, url: str, now: float) -> bool:
        return self.down.get(url, 0.0) <= now

    # --- what came back ----------------------------------------------------------------
    def looked(self, url: str, replies: list[Any], now: float) -> None:
        """The look's replies from `url` (error replies as exception values)."""
        said_fronts, said_owner = replies
        self.answered(url)
        before = (self.owner, self.fronts, self.several)
        self.home = url
        if isinstance(said_fronts, list) and said_fronts and address(url) is not None:
            named = [_text(front) for front in said_fronts]
            self.urls[named[0]] = url  # the front this URL reaches
            self.fronts = [self._url(front, url) for front in named]
            self.several = len(named) > 1
        else:  # a server without EMQ.FRONTS, or a Unix socket: stay with what was given
            self.fronts, self.several = [], False
        self.owner = self._url(_text(said_owner), url) \
            if self.several and isinstance(said_owner, bytes | str) else None
        if not self.several:
            self.look_at = now + SINGLE_S
        elif self.owner is not None and self._up(self.owner, now):
            self.look_at = now + LOOK_S
        else:
            self.look_at = now + FALLBACK_S
        if (self.owner, self.fronts, self.several) != before:
            self.changes += 1

    def _url(self, front: str, template: str) -> str:
        url = self.urls.get(front)
        if url is None:
            url = self.urls[front] = at(template, front)
        return url

    def answered(self, url: str) -> None:
        """A request to `url` was answered: it is reached, and up."""
        if url not in self.reached or url in self.down:
            self.reached.add(url)
            self.down.pop(url, None)
            self.changes += 1

    def failed(self, url: str, now: float) -> None:
        """The connection to `url` failed (refused, or lost): pass it over for a while,
        and look again wherever the next request goes."""
        self.down[url] = now + DOWN_S
        self.reached.discard(url)
        if self.home == url:
            self.home = None
        self.look_at = now
        self.changes += 1

    def unreached(self, url: str, error: BaseException, now: float) -> None:
        """A probe of `url` raised `error`: a refusal no retry fixes (a wrong password)
        is left to the request, which meets it too; anything else is a failure."""
        if is_permanent(error):
            self.looked(url, [error, error], now)
        else:
            self.failed(url, now)

    def refused(self, now: float) -> None:
        """A "not now" reply (TRYAGAIN, CLUSTERDOWN): the owner may have moved; look
        again with the next request (with one front, there is nowhere else to look)."""
        if self.several and self.look_at > now:
            self.look_at = now
            self.changes += 1


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
