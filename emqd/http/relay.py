"""A queue's pages from any front in cluster mode: served by the front that owns the queue.

A front's store holds only the queues it owns (emqd/cluster/front.py), so a
queue's page, its jobs, its dead letters and their buttons are served where
the queue is owned (`through_owner` wraps their handlers):

- owned here: served here, as in single mode;
- owned by another front: the request is relayed to that front's dashboard
  (its address is the one that front wrote in the fronts' registry,
  `emq:fronts:info`, which clients cannot write; a front that is not live in
  the registry is never sent anything), with the user's own `Authorization`
  (the fronts share their password) and the CSRF token this front gave the
  browser, and its answer (the page, a redirect, a refusal) comes back as it
  is. The browser stays on this front: every link and redirect is a path;
- owned by nobody (an idle queue): taken as a request to it would be, by the
  live front it belongs to (fronts.py `place`: the request is relayed there,
  marked VIA, and that front takes it), then served. A request marked VIA is
  never relayed on: it is served where it arrives, or refused with 503 when
  the queue moved meanwhile (the next click finds it);
- not in the registry: this front's 404, and nothing is taken (issue 35: a
  request that only reads takes no lease on a queue that does not exist).

A front without a dashboard (`--http-port 0`) owns queues all the same: its
queues' pages answer 503 naming it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from yarl import URL

from emqd.cluster.nodes import FAILED
from emqd.cluster.ownership import address_of
from emqd.http.context import segment
from emqd.http.security import CSRF_COOKIE, Handler

if TYPE_CHECKING:
    from emqd.cluster.front import Front

VIA = "X-Emqd-Via"  # a request relayed by another front (its address): never relayed on
FORWARDED = ("Authorization", "Content-Type", "Origin", "Accept")  # the request's, as sent
RETURNED = ("Content-Type", "Location", "WWW-Authenticate")  # the owner's answer's


class Relay:
    """This front's relay of queue pages to the fronts that own their queues."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.session: aiohttp.ClientSession | None = None

    def timeout_s(self) -> float:
        """An owner's answer is awaited this long: a page read, or an action kept durably
        (the commit path's wait, bounded by the write timeout) after the queue loaded."""
        return self.front.lease_s + 2 * self.front.timeout_s

    async def where(self, queue: bytes, relayed: bool) -> bytes | None:
        """The dashboard address to relay a request about `queue` to; None to serve it
        here (owned here now, taken here now, or unknown: the handler's 404)."""
        front = self.front
        if front.serves(queue):
            return None
        try:
            owner = await front.leases.owner(queue)
            if owner is None and not await front.exists(queue):
                return None  # the 404: nothing taken
        except FAILED as exc:
            raise web.HTTPServiceUnavailable(
                text=f"the cluster did not answer ({exc}); reload in a moment") from None
        address = address_of(owner) if owner is not None else front.fronts.place(queue)
        if address != front.address and not relayed:
            return self._dashboard_of(address, queue)
        if owner is not None and address != front.address:
            raise web.HTTPServiceUnavailable(
                text=f"queue moved to the front {address.decode('latin-1')}; reload")
        try:
            taken = await asyncio.wait_for(front.adopt(queue, owner), self.timeout_s())
        except (*FAILED, ValueError) as exc:
            raise web.HTTPServiceUnavailable(
                text=f"queue not taken here ({exc}); reload in a moment") from None
        if not taken:
            raise web.HTTPServiceUnavailable(text="queue is moving; reload in a moment")
        return None

    def _dashboard_of(self, address: bytes, queue: bytes) -> bytes:
        fronts = self.front.fronts
        dashboard = fronts.http.get(address, b"") if address in fronts.live else b""
        if not dashboard:
            raise web.HTTPServiceUnavailable(
                text=f"queue {queue.decode('utf-8', 'backslashreplace')} is served by the "
                       f"front {address.decode('latin-1')}, whose dashboard is off or not "
                       f"live; ask it, or reload in a moment")
        return dashboard

    def _client(self) -> aiohttp.ClientSession:
        if self.session is None:
            self.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s()),
                cookie_jar=aiohttp.DummyCookieJar())
        return self.session

    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
        headers["Host"] = request.host  # the owner judges Origin and loopback as this front
        headers["Cookie"] = f"{CSRF_COOKIE}={request['csrf']}"  # the token this page carries
        headers[VIA] = self.front.address.decode("latin-1")
        return headers

    async def from_every_front(self, request: web.Request, path: str,
                               ) -> dict[str, Any | None]:
        """GET `path` (JSON) from every other live front's dashboard, at once: each
        front's address and its answer (None: it did not answer, or has no dashboard)."""
        fronts = self.front.fronts
        others = sorted(fronts.live - {self.front.address})

        async def one(address: bytes) -> Any | None:
            dashboard = fronts.http.get(address, b"")
            if not dashboard:
                return None
            url = URL(f"http://{dashboard.decode('latin-1')}{path}", encoded=True)
            try:
                async with self._client().get(url, headers=self._headers(request),
                                              timeout=aiohttp.ClientTimeout(
                                                  total=self.front.timeout_s),
                                              allow_redirects=False) as answer:
                    return await answer.json() if answer.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return None

        answers = await asyncio.gather(*(one(address) for address in others))
        return {address.decode("latin-1"): answer
                for address, answer in zip(others, answers, strict=True)}

    async def relay(self, request: web.Request, dashboard: bytes) -> web.Response:
        """`request` as the front whose dashboard is at `dashboard` answers it."""
        headers = self._headers(request)
        url = URL(f"http://{dashboard.decode('latin-1')}{request.rel_url.raw_path_qs}",
                  encoded=True)
        try:
            async with self._client().request(request.method, url, headers=headers,
                                            data=await request.read(),
                                            allow_redirects=False) as answer:
                body = await answer.read()
                returned = {name: answer.headers[name] for name in RETURNED
                            if name in answer.headers}
                return web.Response(status=answer.status, body=body, headers=returned)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise web.HTTPServiceUnavailable(
                text=f"the front serving this queue ({dashboard.decode('latin-1')}) did "
                       f"not answer ({exc or type(exc).__name__}); reload in a moment"
            ) from None

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


RELAY: web.AppKey[Relay] = web.AppKey("relay")  # cluster mode only (app.py sets it)


def through_owner(handler: Handler) -> Handler:
    """`handler` for a queue's path (`/queues/<queue>/...`), served where the queue is
    owned (see the module's docstring); as it is outside cluster mode."""
    async def served(request: web.Request) -> web.StreamResponse:
        relay = request.app.get(RELAY)
        if relay is None:
            return await handler(request)
        dashboard = await relay.where(segment(request, 1), VIA in request.headers)
        if dashboard is None:
            return await handler(request)
        return await relay.relay(request, dashboard)

    served.__name__ = handler.__name__
    served.__doc__ = handler.__doc__
    return served
