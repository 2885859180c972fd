"""Where the client connects: the URLs it was given, and a front's URL from its address.

The fronts of a cluster are one service, so a queue may be given several of
them: a list of URLs, or one URL that names several hosts, as `$EMQD_URL` can
(`redis://:PASSWORD@a:6390,b:6391/0`: every host shares the scheme, the user and
password, the database and the options), or URLs joined by commas
(`redis://a:6390,rediss://b:6391`). Any one of them is enough: the client learns
the others from it (EMQ.FRONTS, emqd/client/routes.py).

The fronts name each other by the address they announce, `HOST:PORT`
(`--cluster-announce`); the client reaches a front it learnt of that way with a
URL it was given, its host and port replaced (`at`), so that the password, the
database and TLS go with it. No socket here: the routes' tests are pure.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Sequence

DEFAULT_URL = "redis://127.0.0.1:6390"
URL_ENV = "EMQD_URL"
DEFAULT_PORT = 6379  # redis-py's, for a URL that names none
_NEXT_URL = re.compile(r"\s*,\s*(?=(?:redis|rediss|unix)://)")


def given(url: str | Sequence[str] | None) -> list[str]:
    """Every URL `url` names (None: $EMQD_URL, else emqd's default address), in order."""
    if url is None or url == "" or (not isinstance(url, str) and not url):
        url = os.environ.get(URL_ENV) or DEFAULT_URL
    texts = [url] if isinstance(url, str) else list(url)
    return [one for text in texts for whole in _NEXT_URL.split(text.strip())
            for one in _hosts(whole)]


def _hosts(url: str) -> list[str]:
    """A URL that names several hosts (`redis://pw@a:1,b:2/0`) as one URL a host."""
    parts = urllib.parse.urlsplit(url)
    if "," not in parts.netloc:
        return [url]
    login, at, hosts = parts.netloc.rpartition("@")
    return [urllib.parse.urlunsplit(parts._replace(netloc=login + at + host.strip()))
            for host in hosts.split(",") if host.strip()]


def joined(urls: Sequence[str]) -> str:
    """The URLs as one text (`Queue.url`), which `given` reads back as they are."""
    return ",".join(urls)


def address(url: str) -> str | None:
    """`HOST:PORT` of a redis:// or rediss:// URL, as the fronts write theirs; None for a
    Unix socket (a front is reached over TCP)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        return None
    host = parts.hostname
    return f"[{host}]:{parts.port or DEFAULT_PORT}" if ":" in host else \
        f"{host}:{parts.port or DEFAULT_PORT}"


def at(url: str, front: str) -> str:
    """`url` with its host and port replaced by those of `front` (`HOST:PORT`, an IPv6
    host with or without its brackets)."""
    parts = urllib.parse.urlsplit(url)
    host, _, port = front.rpartition(":")
    host = host.strip("[]")
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    login, sign, _ = parts.netloc.rpartition("@")
    return urllib.parse.urlunsplit(parts._replace(netloc=login + sign + netloc))


def redacted(url: str) -> str:
    """The URL(s) with the password masked, for logs and messages."""
    return joined([_redacted(one) for one in given(url)]) if url else url


def _redacted(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))
