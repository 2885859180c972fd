"""A small HTTP client for the wire tests: cookies kept, redirects followed, errors returned.

Deliberately not a browser: it sends exactly what a test says (a forged Host,
a missing token, a wrong password) and returns whatever the server answers.
"""

from __future__ import annotations

import base64
import html
import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


class Web:
    def __init__(self, port: int, password: str | None = None) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        self.password = password

    def request(self, path: str, data: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        body = None if data is None else urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        if self.password is not None:
            token = base64.b64encode(f"ops:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with self.opener.open(request, timeout=10) as response:
                return Answer(response.status, dict(response.headers), response.read(),
                              response.url)
        except urllib.error.HTTPError as error:
            return Answer(error.code, dict(error.headers), error.read(), error.url)

    def get(self, path: str, **headers: str) -> Answer:
        return self.request(path, headers=headers)

    def post(self, path: str, fields: dict[str, str], **headers: str) -> Answer:
        return self.request(path, data=fields, headers=headers)

    def submit(self, page: Answer, action: str, **fields: str) -> Answer:
        """POST the form of `page` whose action is `action`, with its hidden fields."""
        match = re.search(r'<form method="post" action="' + re.escape(action) + r'"(.*?)</form>',
                          page.text, re.S)
        assert match, f"no form for {action} on {page.url}"
        hidden = {name: html.unescape(value) for name, value in re.findall(
            r'<input type="hidden" name="(\w+)" value="([^"]*)">', match.group(1))}
        return self.post(action, {**hidden, **fields})
