"""Pub/Sub against redis-server 7.0, byte for byte, RESP2 and RESP3.

Every script runs on both servers and the whole stream each connection
received (replies and messages, interleaved as they arrived) must be the
same bytes. Redis orders a few things by its hash tables, seeded at random
at each start (UNSUBSCRIBE without arguments, PUBSUB CHANNELS, several
patterns matching one message for one client): those are compared as
multisets of frames, in their own tests.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import hiredis
import pytest
import redis

from tests.commands.conversations import converse, frames
from tests.support import RawClient, encode_request
from tests.wire.compare import same_replies

Ports = tuple[int, int]
_HELLO_ID = re.compile(rb"\$2\r\nid\r\n:[0-9]+\r\n")


def both_streams(script: list, ports: Ports, connections: int = 2) -> list[list[bytes]]:
    """The script's streams on each server, HELLO's client id (not the same number) blanked."""
    return [[_HELLO_ID.sub(b"$2\r\nid\r\n:#\r\n", stream)
             for stream in converse(port, script, connections)] for port in ports]


def same_streams(emqd_port: int, redis_port: int, script: list, connections: int = 2) -> None:
    ours, theirs = both_streams(script, (emqd_port, redis_port), connections)
    for index, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == ref, f"connection {index}:\n emqd  {mine!r}\n redis {ref!r}"


def settled(port: int) -> None:
    """Wait (boundedly) until the server has seen every earlier connection close."""
    with redis.Redis(port=port) as client:
        deadline = time.monotonic() + 5
        while client.pubsub_numpat() or client.pubsub_channels():
            assert time.monotonic() < deadline, "subscriptions outlived their connections"
            time.sleep(0.01)


def _parse(reply: bytes) -> object:
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


def _as_dict(value: object) -> dict:
    if isinstance(value, dict):
        return value
    items = list(value)  # type: ignore[call-overload]
    return dict(zip(items[::2], items[1::2], strict=True))



@pytest.fixture
def servers(emqd_port: int, redis_ref: int) -> Ports:
    """Both servers, with no subscriber left over from an earlier test."""
    settled(emqd_port)
    settled(redis_ref)
    return emqd_port, redis_ref


SUBSCRIBED_RESP2 = [
    ("UNSUBSCRIBE",), ("PUNSUBSCRIBE",), ("UNSUBSCRIBE", "never"), ("PUNSUBSCRIBE", "n*"),
    ("SUBSCRIBE", "a", "a"), ("SUBSCRIBE",), ("PSUBSCRIBE",), ("PING",), ("PING", "x"),
    ("PING", "x", "y"), ("ECHO", "x"), ("HSET", "k", "f", "v"), ("MULTI",), ("EXEC",), ("DISCARD",),
    ("PUBLISH", "a", "m"), ("CLIENT", "ID"), ("PUBSUB", "NUMSUB", "a"), ("HELLO", "3"),
    ("nosuch",), ("CLIENT", "nope"), ("UNSUBSCRIBE", "zz"),
    ("PSUBSCRIBE", "a*"), ("UNSUBSCRIBE",), ("PING",), ("PUNSUBSCRIBE",), ("PING",),
    ("SUBSCRIBE", "x"), ("RESET",), ("PING",), ("PUBSUB", "NUMSUB", "x"), ("PSUBSCRIBE", "p"),
    ("QUIT",),
]


def test_subscribed_mode_in_resp2_allows_only_what_redis_allows(servers: Ports) -> None:
    same_streams(*servers, [(0, request) for request in SUBSCRIBED_RESP2], connections=1)


def test_subscribed_mode_refuses_the_queue_verbs_as_redis_refuses_its_own(servers: Ports) -> None:
    script = [(0, ("SUBSCRIBE", "a")), (0, ("HSET", "q", "x", "y"))]
    refusal = frames(converse(servers[1], script, 1)[0])[1].replace(b"hset", b"emq.add")
    script = [(0, ("SUBSCRIBE", "a")), (0, ("EMQ.ADD", "q", "x"))]
    assert frames(converse(servers[0], script, 1)[0])[1] == refusal


RESP3_ALONE = [
    ("HELLO", "3"), ("UNSUBSCRIBE",), ("SUBSCRIBE", "a"), ("PSUBSCRIBE", "a*"),
    ("PUBLISH", "a", "to myself"), ("PING",), ("PING", "x"), ("HSET", "k", "f", "v"),
    ("CLIENT", "GETNAME"), ("PUBLISH", "b", "nobody"), ("PUBLISH", "ab", "the pattern"),
    ("MULTI",), ("PUBLISH", "a", "queued"), ("PING",), ("EXEC",), ("UNSUBSCRIBE", "a"),
    ("PUNSUBSCRIBE",), ("UNSUBSCRIBE",), ("PUNSUBSCRIBE",), ("PING",), ("SUBSCRIBE", "c"),
    ("HELLO", "2"), ("PING",), ("PUBLISH", "c", "x"), ("RESET",), ("PING",),
]


def test_resp3_pushes_between_replies_and_to_the_publisher_itself(servers: Ports) -> None:
    same_streams(*servers, [(0, request) for request in RESP3_ALONE], connections=1)


@pytest.mark.parametrize("subscriber", [2, 3])
@pytest.mark.parametrize("publisher", [2, 3])
def test_messages_reach_another_connection_between_its_replies(
    servers: Ports, subscriber: int, publisher: int
) -> None:
    binary = bytes(range(256)) + b"\r\n$3\r\n"
    script = [
        (0, ("HELLO", subscriber)), (1, ("HELLO", publisher)),
        (1, ("PUBLISH", "news", "before")), (0, ("SUBSCRIBE", "news", "other")),
        (1, ("PUBLISH", "news", "hi")), (1, ("PUBLISH", "nope", "x")),
        (0, ("PSUBSCRIBE", "n?x")), (1, ("PUBLISH", "nex", "pattern only")),
        (1, ("PUBLISH", "news", binary)), (1, ("PUBLISH", "news", "")), (0, ("PING",)),
        (1, ("PUBSUB", "NUMSUB", "news", "other", "n?x", "none")), (1, ("PUBSUB", "NUMPAT")),
        (1, ("PUBSUB", "CHANNELS", "ne*")), (1, ("PUBSUB", "CHANNELS", "x*")),
        (0, ("HSET", "k", "f", "v")), (1, ("PUBLISH", "news", "after a refusal")),
        (0, ("UNSUBSCRIBE", "news")), (1, ("PUBLISH", "news", "gone")),
        (1, ("PUBLISH", "nex", "still the pattern")), (0, ("PUNSUBSCRIBE", "n?x")),
        (1, ("PUBLISH", "nex", "nobody")), (0, ("UNSUBSCRIBE", "other")), (0, ("PING",)),
        (1, ("PUBSUB", "NUMSUB", "news", "other")), (1, ("PUBSUB", "NUMPAT")),
    ]
    same_streams(*servers, script)


def test_one_channel_many_subscribers_and_duplicate_deliveries(servers: Ports) -> None:
    script = [
        (0, ("SUBSCRIBE", "c")), (1, ("HELLO", "3")), (1, ("SUBSCRIBE", "c")),
        (1, ("PSUBSCRIBE", "c*")), (2, ("PUBLISH", "c", "three")), (2, ("PUBLISH", "cc", "one")),
        (2, ("PUBSUB", "NUMSUB", "c")), (2, ("PUBSUB", "NUMPAT")), (0, ("PSUBSCRIBE", "c*")),
        (2, ("PUBSUB", "NUMPAT")), (2, ("PUBLISH", "c", "four")),
    ]
    same_streams(*servers, script, connections=3)


MULTI_SCRIPTS = [
    # SUBSCRIBE queued: its confirmation inside EXEC's array, the publisher's own
    # message before PUBLISH's reply inside it too, then RESP2's subscribed mode.
    [("MULTI",), ("SUBSCRIBE", "a"), ("PUBLISH", "a", "m"), ("PING",), ("EXEC",), ("PING",),
     ("EXEC",), ("MULTI",)],
    [("MULTI",), ("SUBSCRIBE", "z"), ("UNSUBSCRIBE",), ("EXEC",), ("PING",)],
    [("MULTI",), ("SUBSCRIBE", "z"), ("nosuch",), ("EXEC",), ("PING",), ("PUBSUB", "NUMSUB", "z")],
    [("MULTI",), ("PSUBSCRIBE", "z*"), ("DISCARD",), ("PING",)],
    [("HELLO", "3"), ("SUBSCRIBE", "a"), ("MULTI",), ("PUBLISH", "a", "m"), ("SUBSCRIBE", "b"),
     ("UNSUBSCRIBE", "a"), ("PUBLISH", "a", "n"), ("EXEC",), ("RESET",)],
    [("HELLO", "3"), ("MULTI",), ("SUBSCRIBE", "a"), ("HELLO", "2"), ("PUBLISH", "a", "m"),
     ("PING",), ("EXEC",), ("PING",)],
]


@pytest.mark.parametrize("script", MULTI_SCRIPTS, ids=range(len(MULTI_SCRIPTS)))
def test_multi_queues_and_runs_pubsub_like_redis(servers: Ports, script: list) -> None:
    same_streams(*servers, [(0, request) for request in script], connections=1)


def test_pubsub_errors_like_redis(servers: Ports) -> None:
    same_replies(*servers, [
        ("PUBSUB",), ("PUBSUB", "x"), ("PUBSUB", "NUMPAT", "x"), ("PUBSUB", "channels", "a", "b"),
        ("PuBsUb", "CHANNELS", "a", "b\r\nc"), ("PUBSUB", "NUMSUB"), ("PUBSUB", "HELP", "x"),
        ("PUBSUB", "CHANNELS"), ("PUBSUB", "NUMPAT"), ("PUBLISH", "a"), ("PUBLISH", "a", "b", "c"),
        ("SUBSCRIBE",), ("PSUBSCRIBE",), ("PUBLISH", "", ""), ("PUBSUB", "NUMSUB", "", "x"),
    ])


def test_pubsub_help_is_redis_help_without_the_sharded_subcommands(servers: Ports) -> None:
    ours, theirs = (RawClient(port) for port in servers)
    lines = theirs.command("PUBSUB", "HELP").split(b"\r\n")[1:-1]
    kept, skip = [], False
    for line in lines:
        if not line.startswith(b"+    "):
            skip = line.startswith(b"+SHARD")
        if not skip:
            kept.append(line)
    assert len(kept) < len(lines)
    assert ours.command("PUBSUB", "HELP") == b"*%d\r\n" % len(kept) + b"\r\n".join(kept) + b"\r\n"
    ours.close()
    theirs.close()


def test_reset_and_disconnect_leave_every_channel(servers: Ports) -> None:
    script = [
        (0, ("SUBSCRIBE", "a", "b")), (0, ("PSUBSCRIBE", "p*", "q")), (1, ("HELLO", "3")),
        (1, ("SUBSCRIBE", "a")), (1, ("PSUBSCRIBE", "p*")),
        (2, ("PUBSUB", "NUMSUB", "a", "b")), (2, ("PUBSUB", "NUMPAT")),
        (0, ("RESET",)), (2, ("PUBSUB", "NUMSUB", "a", "b")), (2, ("PUBSUB", "NUMPAT")),
        (2, ("PUBLISH", "a", "m")), (2, ("PUBLISH", "pp", "m")), (0, ("PING",)),
        (1, ("RESET",)), (1, ("PING",)), (2, ("PUBLISH", "a", "m")), (2, ("PUBSUB", "NUMPAT")),
    ]
    same_streams(*servers, script, connections=3)
    for port in servers:
        client = RawClient(port)
        client.command("SUBSCRIBE", "gone")
        client.command("PSUBSCRIBE", "gone*")
        client.close()
        settled(port)  # the closed connection left "gone" and "gone*" (bounded wait)
        other = RawClient(port)
        assert other.command("PUBLISH", "gone", "x") == b":0\r\n"
        other.close()


def _names_and_counts(stream: bytes) -> tuple[list[bytes], list[bytes]]:
    """(Un)subscribe confirmations: the names they name, sorted, and their counts in order."""
    found = [frame.split(b"\r\n") for frame in frames(stream)]
    return sorted(parts[4] for parts in found), [parts[-2] for parts in found]


def test_where_redis_orders_by_hash_the_same_frames_arrive(servers: Ports) -> None:
    """UNSUBSCRIBE of everything, several patterns matching one message, PUBSUB CHANNELS."""
    leave_all = [(0, ("SUBSCRIBE", "a", "b", "c")), (0, ("UNSUBSCRIBE",))]
    ours, theirs = (converse(port, leave_all, 1)[0] for port in servers)
    assert _names_and_counts(ours) == _names_and_counts(theirs)
    patterns = [(0, ("HELLO", "3")), (0, ("PSUBSCRIBE", "a*", "?", "[a-c]", "*")),
                (1, ("PUBLISH", "a", "m")), (1, ("PUBLISH", "z", "m"))]
    ours, theirs = both_streams(patterns, servers)
    assert [Counter(frames(stream)) for stream in ours] == [Counter(frames(s)) for s in theirs]
    channels = [(0, ("SUBSCRIBE", "x1", "x2", "y")), (1, ("PUBSUB", "CHANNELS")),
                (1, ("PUBSUB", "CHANNELS", "x*"))]
    ours, theirs = (converse(port, channels)[1] for port in servers)
    listed = [sorted(_parse(frame)) for frame in frames(ours)]  # type: ignore[call-overload]
    assert listed == [sorted(_parse(f)) for f in frames(theirs)]  # type: ignore[call-overload]
    assert listed == [[b"x1", b"x2", b"y"], [b"x1", b"x2"]]


PATTERNS = [
    "*", "", "a*", "*a", "a?c", "[abc]", "[^abc]", "[a-c]x", "[c-a]x", "a[", "[a-", "\\*", "\\",
    "h\\?llo", "*[", "?*?", "[\\]]", "**", "a*b*c", "[^]", "[]a]",
]
CHANNELS = [
    "", "a", "abc", "ba", "ax", "bx", "*", "?", "]", "[", "hello", "h?llo", "aXbYc", "\\", "a[",
]


def test_patterns_match_as_redis_matches_them(servers: Ports) -> None:
    """Each pattern alone against every channel: PUBLISH counts and pmessage frames equal;
    then PUBSUB CHANNELS with each pattern (listed in hash order by Redis: sorted here)."""
    script: list = []
    for pattern in PATTERNS:
        script.append((0, ("PSUBSCRIBE", pattern)))
        script.append((1, [("PUBLISH", channel, pattern) for channel in CHANNELS]))
        script.append((0, ("PUNSUBSCRIBE", pattern)))
    same_streams(*servers, script)
    listing = [(0, ("SUBSCRIBE", *CHANNELS)), (1, [("PUBSUB", "CHANNELS", p) for p in PATTERNS])]
    ours, theirs = (frames(streams[1]) for streams in both_streams(listing, servers))
    assert [sorted(_parse(f)) for f in ours] == [  # type: ignore[call-overload]
        sorted(_parse(f)) for f in theirs]  # type: ignore[call-overload]


def _listed(port: int, protocol: int, script: list[tuple], expected_frames: int) -> dict:
    """The fields of a subscriber (after `script`) in CLIENT LIST TYPE pubsub, and
    whether CLIENT LIST TYPE normal lists it, as seen from another client."""
    subscriber = RawClient(port)
    try:
        subscriber.command("HELLO", protocol)
        subscriber.command("CLIENT", "SETNAME", "listener")
        subscriber.send(b"".join(encode_request(*request) for request in script))
        for _ in range(expected_frames):
            subscriber.read_reply()
        with redis.Redis(port=port) as other:
            pubsub = [c for c in other.client_list(_type="pubsub") if c["name"] == "listener"]
            normal = [c for c in other.client_list(_type="normal") if c["name"] == "listener"]
        assert len(pubsub) == 1, pubsub
        fields = {k: pubsub[0][k] for k in ("flags", "sub", "psub", "ssub", "multi", "resp")}
        return {**fields, "listed as normal": bool(normal)}
    finally:
        subscriber.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_client_list_shows_the_pubsub_flag_and_counts_like_redis(
    servers: Ports, protocol: int
) -> None:
    script = [("SUBSCRIBE", "a", "b"), ("PSUBSCRIBE", "c*")]
    if protocol == 3:
        script.append(("MULTI",))  # RESP3 can open a transaction while subscribed: flags=Px
    got = []
    for port in servers:
        got.append(_listed(port, protocol, script, len(script) + 1))
        settled(port)
    assert got[0] == got[1]
    assert got[0]["flags"] == ("Px" if protocol == 3 else "P") and got[0]["sub"] == "2"


def test_info_counts_channels_and_patterns_like_redis(servers: Ports) -> None:
    fields = ("pubsub_channels", "pubsub_patterns", "pubsubshard_channels")
    seen = []
    for port in servers:
        one, two = RawClient(port), RawClient(port)
        one.command("SUBSCRIBE", "a", "b")
        one.command("PSUBSCRIBE", "p*", "q*")
        two.command("SUBSCRIBE", "a")
        two.command("PSUBSCRIBE", "p*")
        with redis.Redis(port=port) as client:
            stats = client.info("stats")
        seen.append({field: stats[field] for field in fields})
        one.close()
        two.close()
        settled(port)
    assert seen[0] == seen[1] == {"pubsub_channels": 2, "pubsub_patterns": 2,
                                  "pubsubshard_channels": 0}


SHARDED = (b"pubsub|shardchannels", b"pubsub|shardnumsub")  # Redis has them, emqd has not


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_and_docs_are_redis_rows(servers: Ports, protocol: int) -> None:
    rows = ("subscribe", "unsubscribe", "psubscribe", "punsubscribe", "publish")
    exact, container, docs = [], [], []
    for port in servers:
        client = RawClient(port)
        client.command("HELLO", protocol)
        exact.append([client.command("COMMAND", "INFO", name) for name in rows])
        info = _parse(client.command("COMMAND", "INFO", "pubsub"))[0]  # type: ignore[index]
        subs = sorted(row for row in info[9] if row[0] not in SHARDED)
        container.append(info[:9] + [subs])
        pages = _as_dict(_parse(client.command("COMMAND", "DOCS", "pubsub", *rows)))
        docs.append({
            name: (_as_dict(page)[b"summary"], _as_dict(page)[b"group"],
                   {sub: _as_dict(doc)[b"summary"]
                    for sub, doc in _as_dict(_as_dict(page).get(b"subcommands", {})).items()
                    if sub not in SHARDED})
            for name, page in pages.items()
        })
        client.close()
    assert exact[0] == exact[1]
    assert container[0] == container[1]
    assert docs[0] == docs[1]


def test_config_get_client_output_buffer_limit_like_redis(servers: Ports) -> None:
    same_replies(*servers, [("CONFIG", "GET", "client-output-buffer-limit")])
