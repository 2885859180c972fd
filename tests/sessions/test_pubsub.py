"""The Pub/Sub registry on its own: subscriptions, counts, frames, delivery, the pattern cache.

(What clients see, compared with redis-server, is tests/commands/test_pubsub.py.)
"""

from __future__ import annotations

import pytest

from emqd.config import Config
from emqd.core import Core, Session
from emqd.sessions import pubsub as registry
from emqd.sessions.pubsub import PubSub


@pytest.fixture
def state() -> Core:
    return Core(Config())


def delivered_by(hub: PubSub) -> list[tuple[Session, bytes]]:
    sent: list[tuple[Session, bytes]] = []
    hub.deliver = lambda session, frame, needed: sent.append((session, frame))
    return sent


def test_counts_are_channels_plus_patterns_and_the_last_leave_ends_subscribed_mode(
    state: Core,
) -> None:
    hub, one = state.pubsub, Session(state)
    assert one.pubsub is None
    counts = [hub.subscribe(one, b"a"), hub.subscribe(one, b"a"), hub.psubscribe(one, b"a*")]
    assert counts == [1, 1, 2]
    assert hub.unsubscribe(one, b"never") == 2 and hub.punsubscribe(one, b"never*") == 2
    assert one.pubsub is not None and list(one.pubsub.channels) == [b"a"]
    assert hub.unsubscribe(one, b"a") == 1 and one.pubsub is not None
    assert hub.punsubscribe(one, b"a*") == 0 and one.pubsub is None
    assert hub.channels == {} and hub.patterns == {}
    assert hub.unsubscribe(one, b"a") == 0  # a plain client leaving: nothing to do


def test_leave_forgets_a_session_everywhere_and_keeps_the_others(state: Core) -> None:
    hub, one, two = state.pubsub, Session(state), Session(state)
    for session in (one, two):
        hub.subscribe(session, b"c")
        hub.psubscribe(session, b"c*")
    hub.subscribe(one, b"only-one")
    hub.leave(one)
    assert one.pubsub is None
    assert hub.channels == {b"c": {two: None}} and list(hub.patterns) == [b"c*"]
    assert hub.numsub(b"c") == 1 and hub.numsub(b"only-one") == 0
    assert hub.publish(b"c", b"m") == 2  # two's channel and two's pattern
    hub.leave(one)  # twice: nothing


def test_each_receiver_gets_the_frame_in_its_protocol(state: Core) -> None:
    hub, two, three = state.pubsub, Session(state), Session(state)
    three.resp = 3
    sent = delivered_by(hub)
    hub.subscribe(two, b"ch")
    hub.subscribe(three, b"ch")
    hub.psubscribe(three, b"c?")
    assert hub.publish(b"ch", b"hi\r\n") == 3
    assert sent == [
        (two, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nhi\r\n\r\n"),
        (three, b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nhi\r\n\r\n"),
        (three, b">4\r\n$8\r\npmessage\r\n$2\r\nc?\r\n$2\r\nch\r\n$4\r\nhi\r\n\r\n"),
    ]
    assert hub.publish(b"nobody", b"x") == 0 and len(sent) == 3


def test_the_publishers_own_frames_are_returned_not_delivered(state: Core) -> None:
    hub, me, other = state.pubsub, Session(state), Session(state)
    sent = delivered_by(hub)
    for session in (me, other):
        hub.subscribe(session, b"c")
    hub.psubscribe(me, b"*")
    receivers, own = hub.publish_from(me, b"c", b"m")
    assert receivers == 3
    assert own == (b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"
                   b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nc\r\n$1\r\nm\r\n")
    assert [session for session, _ in sent] == [other]
    assert hub.publish_from(other, b"elsewhere", b"m") == (1, b"")  # me's `*` pattern


def test_wants_follows_patterns_added_and_removed_after_it_answered(state: Core) -> None:
    hub, one = state.pubsub, Session(state)
    assert not hub.wants(b"emq:{q}:events")
    hub.psubscribe(one, b"emq:*")
    assert hub.wants(b"emq:{q}:events") and not hub.wants(b"other")
    hub.psubscribe(one, b"oth?r")
    assert hub.wants(b"other")
    hub.punsubscribe(one, b"emq:*")
    assert not hub.wants(b"emq:{q}:events") and hub.publish(b"emq:{q}:events", b"x") == 0
    hub.subscribe(one, b"emq:{q}:events")
    assert hub.wants(b"emq:{q}:events")


def test_a_new_subscriber_of_a_known_pattern_is_seen_by_a_remembered_match(
    state: Core,
) -> None:
    hub, one, two = state.pubsub, Session(state), Session(state)
    hub.psubscribe(one, b"a*")
    assert hub.publish(b"ab", b"m") == 1  # the match of "ab" is remembered here
    hub.psubscribe(two, b"a*")
    assert hub.publish(b"ab", b"m") == 2


def test_remembered_matches_are_bounded(
    state: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MATCH_CACHE_MAX", 8)
    hub, one = state.pubsub, Session(state)
    hub.psubscribe(one, b"*")
    for n in range(100):
        assert hub.publish(b"channel-%d" % n, b"m") == 1
        assert len(hub._matching) <= 8


def test_a_lone_star_needs_a_byte_and_the_empty_pattern_matches_the_empty_channel(
    state: Core,
) -> None:
    hub, one, two = state.pubsub, Session(state), Session(state)
    hub.psubscribe(one, b"*")
    hub.psubscribe(two, b"")
    assert hub.publish(b"", b"m") == 1 and hub.publish(b"x", b"m") == 1
    hub.subscribe(one, b"")
    assert hub.active_channels(None) == [b""]
    assert hub.active_channels(b"*") == [] and hub.active_channels(b"") == [b""]

