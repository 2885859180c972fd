"""emqd/http/security.py: the basic-auth check and the loopback Host check."""

from __future__ import annotations

import base64

import pytest

from emqd.http.security import is_loopback_host, password_matches


def basic(credentials: bytes) -> str:
    return "Basic " + base64.b64encode(credentials).decode()


@pytest.mark.parametrize(("header", "ok"), [
    (basic(b"anyone:sekret"), True),
    (basic(b":sekret"), True),
    ("basic " + base64.b64encode(b"u:sekret").decode(), True),
    (basic(b"anyone:wrong"), False),
    (basic(b"sekret"), False),  # no colon: no password at all
    (basic(b"u:sekret:more"), False),
    ("Bearer sekret", False),
    ("Basic !!!", False),
    ("", False),
    (None, False),
])
def test_any_user_name_with_the_password(header: str | None, ok: bool) -> None:
    assert password_matches(header, "sekret") is ok


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1:6391", True), ("127.0.0.1", True), ("127.1.2.3:80", True),
    ("localhost:6391", True), ("LOCALHOST", True), ("[::1]:6391", True), ("[::1]", True),
    ("::1", True), ("evil.example:6391", False), ("10.0.0.1:6391", False), ("", False),
    (None, False), ("127.0.0.1.evil.example", False), ("[::1", False),
])
def test_only_loopback_names_pass_without_a_password(host: str | None, ok: bool) -> None:
    assert is_loopback_host(host) is ok
