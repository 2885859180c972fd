"""emqd/serve/auth_failures.py: refused passwords are counted in INFO stats (Redis 7.2's
`acl_access_denied_auth`) and logged, one line an interval; over the wire for AUTH,
HELLO ... AUTH and the dashboard's basic auth."""

from __future__ import annotations

import base64
import logging
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
import redis

from emqd.serve.auth_failures import AuthFailures
from tests.support import RawClient, encode_request, start_emqd


class Timers:
    """call_later by hand: `fire()` runs what is due, as the loop would."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> object:
        self.pending.append((delay, callback))
        return object()

    def fire(self) -> None:
        due, self.pending = self.pending, []
        for _, callback in due:
            callback()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]


def test_a_burst_is_one_line_now_and_one_line_an_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="emqd")
    timers = Timers()
    failures = AuthFailures(10.0, timers)
    for i in range(50_000):
        failures.refused(f"client 127.0.0.1:{1000 + i % 3}")
    assert failures.info() == {"acl_access_denied_auth": 50_000}
    assert lines(caplog) == [
        "refused a password from client 127.0.0.1:1000 (INFO stats acl_access_denied_auth:1)"]
    assert [delay for delay, _ in timers.pending] == [10.0]
    timers.fire()  # the interval ends: one line with the count, and another interval
    assert lines(caplog)[1:] == [
        "refused 49999 more passwords in the last 10s, the last from client 127.0.0.1:1001 "
        "(INFO stats acl_access_denied_auth:50000)"]
    failures.refused("client 127.0.0.1:2000")
    timers.fire()
    assert lines(caplog)[2:] == [
        "refused 1 more password in the last 10s, the last from client 127.0.0.1:2000 "
        "(INFO stats acl_access_denied_auth:50001)"]
    timers.fire()  # a quiet interval ends the spell: nothing logged, no timer
    assert len(lines(caplog)) == 3 and not timers.pending
    failures.refused("client 127.0.0.1:3000")  # the next one is logged at once again
    assert lines(caplog)[3].startswith("refused a password from client 127.0.0.1:3000")


def stat(port: int) -> int:
    with redis.Redis(port=port, password="sekret") as r:
        return int(r.info("stats")["acl_access_denied_auth"])


def test_refused_auths_are_counted_and_logged_once_over_the_wire() -> None:
    server = start_emqd("--requirepass", "sekret", http=True)
    try:
        raw = RawClient(server.port)
        raw.send(b"".join(encode_request("AUTH", f"guess{i}") for i in range(2000)))
        for _ in range(2000):
            assert raw.read_reply() == (
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        assert raw.command("HELLO", "3", "AUTH", "default", "nope").startswith(b"-WRONGPASS")
        assert raw.command("AUTH", "admin", "sekret").startswith(b"-WRONGPASS")
        assert raw.command("AUTH", "sekret") == b"+OK\r\n"  # the connection was kept
        raw.close()
        assert stat(server.port) == 2002
        url = f"http://127.0.0.1:{server.http_port}/metrics"
        with pytest.raises(urllib.error.HTTPError) as asked:
            urllib.request.urlopen(url, timeout=5)  # no password sent: asked, not counted
        assert asked.value.code == 401
        asked.value.close()
        wrong = urllib.request.Request(
            url, headers={"Authorization": "Basic " + base64.b64encode(b"u:guess").decode()})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(wrong, timeout=5)
        assert refused.value.code == 401
        refused.value.close()
        assert stat(server.port) == 2003
    finally:
        server.stop()
    logged = [line for line in server.output().splitlines() if "refused" in line]
    assert len(logged) == 1, logged  # the rest wait for the end of the interval
    assert "refused a password from client 127.0.0.1:" in logged[0]
