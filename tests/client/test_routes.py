"""Where a queue's requests go (emqd/client/routes.py) and the URLs it reaches fronts by
(addresses.py): pure, no socket; the fronts' answers are canned, times are given.

(On a real cluster: tests/cluster/test_client.py, test_client_failover.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import AuthenticationError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError

from emqd.client import addresses
from emqd.client.routes import DOWN_S, FALLBACK_S, LOOK_S, PROBES, SINGLE_S, Routes, Step

A, B, C = "redis://:pw@a:6390/2", "redis://:pw@b:6391/2", "redis://:pw@c:6392/2"


# --- addresses --------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "urls"), [
    ("redis://a:6390", ["redis://a:6390"]),
    ("redis://:pw@a:6390,b:6391/2", ["redis://:pw@a:6390/2", "redis://:pw@b:6391/2"]),
    ("redis://u:p@a:1, b:2/0?ssl_cert_reqs=none",
     ["redis://u:p@a:1/0?ssl_cert_reqs=none", "redis://u:p@b:2/0?ssl_cert_reqs=none"]),
    ("redis://a:1,rediss://b:2, unix:///tmp/s", ["redis://a:1", "rediss://b:2", "unix:///tmp/s"]),
    (["redis://a:1", "redis://b:2,c:3"], ["redis://a:1", "redis://b:2", "redis://c:3"]),
    ("unix:///tmp/emqd.sock", ["unix:///tmp/emqd.sock"]),
])
def test_one_text_or_a_list_names_every_front_given(url: Any, urls: list[str]) -> None:
    assert addresses.given(url) == urls
    assert addresses.given(addresses.joined(urls)) == urls  # Queue.url reads back


def test_no_url_is_emqd_url_else_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQD_URL", "redis://a:1,b:2")
    assert addresses.given(None) == addresses.given([]) == ["redis://a:1", "redis://b:2"]
    monkeypatch.delenv("EMQD_URL")
    assert addresses.given(None) == ["redis://127.0.0.1:6390"]


def test_a_front_announced_by_its_address_is_reached_with_the_given_url_s_login() -> None:
    assert addresses.at(A, "10.0.0.7:7000") == "redis://:pw@10.0.0.7:7000/2"
    assert addresses.at("rediss://u:p@h:1/0?x=1", "[::1]:7000") == "rediss://u:p@[::1]:7000/0?x=1"
    assert addresses.at("redis://h", "::1:7000") == "redis://[::1]:7000"
    assert addresses.address("redis://:pw@a:6390/2") == "a:6390"
    assert addresses.address("rediss://[::1]") == "[::1]:6379"  # redis-py's default port
    assert addresses.address("unix:///tmp/emqd.sock") is None


def test_every_password_of_a_list_is_masked() -> None:
    assert addresses.redacted("redis://u:secret@a:1,b:2") == \
        "redis://u:***@a:1,redis://u:***@b:2"
    assert addresses.redacted("redis://a:1") == "redis://a:1"


# --- routes -----------------------------------------------------------------------------
def said(*fronts: str, owner: str | Exception = "") -> list[Any]:
    """A look's replies: EMQ.FRONTS's addresses, EMQ.OWNER's."""
    return [[front.encode() for front in fronts],
            owner if isinstance(owner, Exception) else owner.encode()]


def test_the_first_request_probes_the_url_given_then_goes_to_the_owner() -> None:
    routes = Routes([A], b"mail")
    assert routes.step(0.0) == Step(A, probe=True, look=True)
    routes.looked(A, said("a:6390", "b:6391", owner="b:6391"), 0.0)
    assert routes.step(0.0) == Step(B, probe=True, look=True)  # reached before anything
    routes.looked(B, said("b:6391", "a:6390", owner="b:6391"), 0.1)
    assert routes.step(0.2) == Step(B, probe=False, look=False)
    assert routes.step(0.1 + LOOK_S) == Step(B, probe=False, look=True)  # asked again


def test_the_first_front_named_is_the_one_the_url_reached() -> None:
    """Behind a load balancer (or NAT) a front announces an address other than the URL's:
    the URL that asked is how that front is reached."""
    routes = Routes(["redis://lb:7000"], b"mail")
    routes.looked("redis://lb:7000", said("10.0.0.1:6390", "10.0.0.2:6390",
                                          owner="10.0.0.1:6390"), 0.0)
    assert routes.step(0.0) == Step("redis://lb:7000", probe=False, look=False)
    routes.looked("redis://lb:7000", said("10.0.0.1:6390", "10.0.0.2:6390",
                                          owner="10.0.0.2:6390"), 0.0)
    assert routes.step(0.0).url == "redis://10.0.0.2:6390"


def test_a_url_given_that_a_front_announces_is_reached_by_that_url() -> None:
    routes = Routes([A, B], b"mail")
    routes.looked(A, said("a:6390", "b:6391", owner="b:6391"), 0.0)
    assert routes.step(0.0).url == B  # the URL given, with its own login


@pytest.mark.parametrize("answer", [
    said("127.0.0.1:6390", owner="0.0.0.0:6390"),  # a single process (or a cluster of one)
    [ResponseError("ERR unknown command 'EMQ.FRONTS'"), ResponseError("ERR unknown command")],
])
def test_one_front_or_an_older_server_means_no_routing(answer: list[Any]) -> None:
    routes = Routes([A], b"mail")
    routes.looked(A, answer, 0.0)
    assert routes.step(0.0) == Step(A, probe=False, look=False)  # never its EMQ.OWNER
    routes.refused(1.0)  # a "not now" moves nothing: there is nowhere else
    assert routes.step(1.0) == Step(A, probe=False, look=False)
    assert routes.step(SINGLE_S) == Step(A, probe=False, look=True)  # a cluster may grow


def test_a_unix_socket_is_not_routed() -> None:
    routes = Routes(["unix:///tmp/s"], b"mail")
    routes.looked("unix:///tmp/s", said("127.0.0.1:6390", "10.0.0.2:6390"), 0.0)
    assert routes.step(0.0) == Step("unix:///tmp/s", probe=False, look=False)


def test_a_dead_owner_is_passed_over_and_its_queue_reached_through_another_front() -> None:
    routes = Routes([A], b"mail")
    routes.looked(A, said("a:6390", "b:6391", "c:6392", owner="b:6391"), 0.0)
    routes.looked(B, said("b:6391", "a:6390", "c:6392", owner="b:6391"), 0.0)
    routes.failed(B, 1.0)  # its connection lost
    # The last front to answer a look was B: the next is the first live one named, which
    # answered before (no probe), and is asked where the queue is now.
    assert routes.step(1.0) == Step(A, probe=False, look=True)
    routes.looked(A, said("a:6390", "b:6391", "c:6392", owner="b:6391"), 1.0)  # its lease
    assert routes.step(1.0) == Step(A, probe=False, look=False)  # forwarded by A
    assert routes.step(1.0 + FALLBACK_S) == Step(A, probe=False, look=True)  # asked sooner
    routes.looked(A, said("a:6390", "b:6391", "c:6392", owner="c:6392"), 1.0 + FALLBACK_S)
    assert routes.step(2.0) == Step(C, probe=True, look=True)  # the new owner
    routes.looked(C, said("c:6392", "a:6390", "b:6391", owner="c:6392"), 2.0)
    assert routes.step(3.0) == Step(C, probe=False, look=False)


def test_a_front_passed_over_is_probed_again_after_a_while() -> None:
    routes = Routes([A, B], b"mail")
    routes.failed(A, 0.0)
    assert routes.step(0.0) == Step(B, probe=True, look=True)
    assert routes.step(DOWN_S) == Step(A, probe=True, look=True)


def test_with_every_front_down_the_request_goes_where_it_went_before_routes() -> None:
    routes = Routes([A, B], b"mail")
    routes.failed(A, 0.0)
    routes.failed(B, 0.0)
    assert routes.step(1.0) == Step(A, probe=False, look=False)  # and fails, or is answered
    routes.answered(A)
    assert routes.step(1.0) == Step(A, probe=False, look=True)  # the look is due at once


def test_a_not_now_reply_makes_the_next_request_look_again() -> None:
    routes = Routes([A], b"mail")
    routes.looked(A, said("a:6390", "b:6391", owner="a:6390"), 0.0)
    assert routes.step(1.0).look is False
    routes.refused(1.0)
    assert routes.step(1.0) == Step(A, probe=False, look=True)


def test_an_owner_the_cluster_cannot_name_now_is_asked_for_again_soon() -> None:
    routes = Routes([A], b"mail")
    routes.looked(A, said("a:6390", "b:6391", owner=TryAgainError("the cluster ...")), 0.0)
    assert routes.step(0.0) == Step(A, probe=False, look=False)  # forwarded meanwhile
    assert routes.step(FALLBACK_S).look


def drive(routes: Routes, answers: dict[str, list[Any] | BaseException]) -> tuple[Step, list[str]]:
    """Run `route` with canned answers to each probe; where it ends, and what it probed."""
    routing = routes.route(0.0)
    probed = []
    try:
        url = next(routing)
        while True:
            probed.append(url)
            url = routing.send(answers[url])
    except StopIteration as done:
        return done.value, probed


def test_route_probes_until_a_front_answers_and_never_sends_a_request_meanwhile() -> None:
    routes = Routes([A, B], b"mail")
    step, probed = drive(routes, {A: RedisConnectionError("refused"),
                                  B: said("b:6391", "c:6392", owner="c:6392"),
                                  C: said("c:6392", "b:6391", owner="c:6392")})
    assert (step, probed) == (Step(C, probe=False, look=False), [A, B, C])


def test_a_wrong_password_is_left_to_the_request_which_meets_it_too() -> None:
    routes = Routes([A, B], b"mail")
    step, probed = drive(routes, {A: AuthenticationError("WRONGPASS")})
    assert (step, probed) == (Step(A, probe=False, look=False), [A])


def test_probes_are_bounded_even_when_the_fronts_keep_naming_new_owners() -> None:
    routes = Routes([A], b"mail")
    urls = [addresses.at(A, f"f{n}:1") for n in range(PROBES + 2)]
    answers: dict[str, list[Any] | BaseException] = {
        A: said("a:6390", "f0:1", owner="f0:1"),
        **{url: said(f"f{n}:1", f"f{n + 1}:1", owner=f"f{n + 1}:1")
           for n, url in enumerate(urls[:-1])}}
    step, probed = drive(routes, answers)
    assert len(probed) == PROBES and step.probe is False
