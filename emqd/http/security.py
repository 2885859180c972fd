"""Who may see and steer: basic auth, the Host check, CSRF tokens, response headers.

- **Password.** With `--requirepass`, every path (pages, /metrics, static
  files) needs HTTP basic auth with that password and any user name, as
  Redis's `AUTH pass` takes any client: a browser asks once, Prometheus sends
  `basic_auth`. The comparison takes the same time whatever the guess; a
  wrong password is counted and logged as a refused AUTH is.
- **Host.** Without a password the server listens on loopback only (the
  command line refuses anything else), and then a request must also name a
  loopback host (`127.0.0.1`, `[::1]`, `localhost`): a web page elsewhere
  that points a name of its own at 127.0.0.1 (DNS rebinding) gets 421 and
  can read nothing.
- **CSRF.** Every form carries a token that a script on another site cannot
  know: a random value in a `SameSite=Strict`, HttpOnly cookie, repeated in a
  hidden field (double submit). A POST whose field and cookie differ, or
  whose `Origin` is another site, is refused with 403 and changes nothing.
- **Headers.** Pages say `Content-Security-Policy` (scripts, styles and
  images from this origin only, no inline script, no framing), `nosniff`,
  `no-store`.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

CSRF_COOKIE = "emqd_csrf"
CSRF_FIELD = "csrf"
REALM = 'Basic realm="emqd", charset="UTF-8"'

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def password_matches(header: str | None, password: str) -> bool:
    """An `Authorization: Basic ...` header that carries `password` (any user name)."""
    if not header or not header[:6].lower() == "basic ":
        return False
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    _, colon, given = decoded.partition(b":")
    return bool(colon) and hmac.compare_digest(given, password.encode())


def is_loopback_host(host: str | None) -> bool:
    """A Host header naming this machine's loopback (with or without a port)."""
    if not host:
        return False
    if host.startswith("["):
        name, closed, _ = host[1:].partition("]")
        if not closed:
            return False
    else:
        name = host.rpartition(":")[0] if host.count(":") == 1 else host
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def guard(password: str | None, refused: Callable[[str], None] = lambda origin: None
          ) -> Middleware:
    """The middleware that applies the rules above to every request. `refused` is told
    of each wrong password sent (emqd/serve/auth_failures.py); a request that sent none (a
    browser's first) is only asked for one."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if password:
            given = request.headers.get("Authorization")
            if not password_matches(given, password):
                if given:
                    refused(f"the dashboard's client {request.remote}")
                return web.Response(status=401, text="401: emqd needs its password\n",
                                    headers={"WWW-Authenticate": REALM, **HEADERS})
        elif not is_loopback_host(request.host):
            return web.Response(status=421, text="421: this emqd answers to loopback names only\n",
                                headers=HEADERS)
        token = request.cookies.get(CSRF_COOKIE) or ""
        fresh = len(token) < 32
        if fresh:
            token = secrets.token_urlsafe(32)
        request["csrf"] = token
        if request.method == "POST" and not await _csrf_ok(request, token, fresh):
            response: web.StreamResponse = web.Response(
                status=403, headers=HEADERS,
                text="403: the form's token is missing or stale; reload the page and try again\n")
        else:
            response = await handler(request)
        response.headers.update({k: v for k, v in HEADERS.items() if k not in response.headers})
        if fresh:
            response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    return middleware


async def _csrf_ok(request: web.Request, token: str, fresh: bool) -> bool:
    if fresh:
        return False  # no cookie: no page of ours was loaded
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        return False
    form = await request.post()
    given = form.get(CSRF_FIELD)
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())
