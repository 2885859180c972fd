"""Pub/Sub's registry: which session listens to which channel and pattern; publishing.

Sans-IO. The registry maps channels and patterns to the sessions subscribed
to them and formats the frames Redis 7.0 sends (`message`, `pmessage`, the
(un)subscribe confirmations), in each receiver's protocol: an array under
RESP2, a push (`>`) under RESP3. It never touches a socket: a message for a
session goes to `deliver(session, frame, needed)`, which the server passes in:
the connection layer's writer (emqd/wire/delivery.py: the commit path's send,
then the slow-subscriber limit); `needed` is the log offset the message must
wait for (emqd/commit/queue_events.py passes the record of the plan an event
reports; PUBLISH, 0).

Inside emqd, publish with `core.pubsub.publish(channel, message)`; ask
`wants(channel)` first to skip formatting a message nobody would receive
(it costs a dict lookup, and one more when patterns exist: which patterns
match a channel is remembered until the set of patterns changes).

Orders where Redis's own are its hash tables' (seeded at random on each
start, so no client can rely on them): emqd delivers a message to a channel's
subscribers, then to each matching pattern's, patterns in the order they were
first subscribed; `UNSUBSCRIBE` with no channel leaves them in the order the
session joined them; `PUBSUB CHANNELS` lists in the order channels appeared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from emqd.compat.glob import compile_pattern

Matcher = Callable[[bytes], bool]
MATCH_CACHE_MAX = 4096  # channels whose matching patterns are remembered; then start over


class Subscriptions:
    """One session's channels and patterns, in the order it subscribed to them.

    A session holds one only while it listens to something (`session.pubsub`
    is None otherwise), which is what makes it a Pub/Sub client: RESP2's
    subscribed mode, `flags=P`, the pubsub output-buffer limit.
    `lagging_since_ms` is that limit's soft-limit clock (emqd/wire/output_limit.py).
    """

    __slots__ = ("channels", "patterns", "lagging_since_ms")

    def __init__(self) -> None:
        self.channels: dict[bytes, None] = {}
        self.patterns: dict[bytes, None] = {}
        self.lagging_since_ms = 0

    def count(self) -> int:
        """What the confirmations report: channels plus patterns."""
        return len(self.channels) + len(self.patterns)


class Subscriber(Protocol):
    """What the registry knows of a session (emqd/core.py `Session`): its id, which names
    its connection, the protocol its frames are written in, and its subscriptions. The
    registry names no more, so it sits below the sessions it holds."""

    id: int
    resp: int
    pubsub: Subscriptions | None


# Writes a frame to a session's connection once the sink holds `needed` (emqd/wire/delivery.py).
Deliver = Callable[[Subscriber, bytes, int], None]


def nowhere(session: Subscriber, frame: bytes, needed: int) -> None:
    """The deliverer of a registry no server is attached to (unit tests)."""


class PubSub:
    def __init__(self, deliver: Deliver = nowhere) -> None:
        self.channels: dict[bytes, dict[Subscriber, None]] = {}
        self.patterns: dict[bytes, tuple[Matcher, dict[Subscriber, None]]] = {}
        self._matching: dict[bytes, tuple[tuple[bytes, dict[Subscriber, None]], ...]] = {}
        self.deliver = deliver

    # --- subscribing ---------------------------------------------------------------
    def subscribe(self, session: Subscriber, channel: bytes) -> int:
        """Listen to `channel` (again is a no-op); the session's count after."""
        subs = _joined(session)
        if channel not in subs.channels:
            subs.channels[channel] = None
            self.channels.setdefault(channel, {})[session] = None
        return subs.count()

    def psubscribe(self, session: Subscriber, pattern: bytes) -> int:
        subs = _joined(session)
        if pattern not in subs.patterns:
            subs.patterns[pattern] = None
            entry = self.patterns.get(pattern)
            if entry is None:
                entry = self.patterns[pattern] = (
                    compile_pattern(pattern, star_matches_empty=False), {}
                )
                self._matching.clear()
            entry[1][session] = None
        return subs.count()

    def unsubscribe(self, session: Subscriber, channel: bytes) -> int:
        """Stop listening to `channel` (if it did); the session's count after."""
        subs = session.pubsub
        if subs is None:
            return 0
        if channel in subs.channels:
            del subs.channels[channel]
            listeners = self.channels[channel]
            del listeners[session]
            if not listeners:
                del self.channels[channel]
        return self._left_if_done(session, subs)

    def punsubscribe(self, session: Subscriber, pattern: bytes) -> int:
        subs = session.pubsub
        if subs is None:
            return 0
        if pattern in subs.patterns:
            del subs.patterns[pattern]
            listeners = self.patterns[pattern][1]
            del listeners[session]
            if not listeners:
                del self.patterns[pattern]
                self._matching.clear()
        return self._left_if_done(session, subs)

    def leave(self, session: Subscriber) -> None:
        """Every channel and pattern, silently: RESET and a closed connection."""
        subs = session.pubsub
        if subs is None:
            return
        for channel in list(subs.channels):
            self.unsubscribe(session, channel)
        for pattern in list(subs.patterns):
            self.punsubscribe(session, pattern)

    @staticmethod
    def _left_if_done(session: Subscriber, subs: Subscriptions) -> int:
        count = subs.count()
        if not count:
            session.pubsub = None  # back to a plain client
        return count

    # --- publishing ----------------------------------------------------------------
    def wants(self, channel: bytes) -> bool:
        """Would a message on `channel` reach anyone? Cheap: ask before formatting one."""
        return channel in self.channels or (bool(self.patterns) and bool(self._matches(channel)))

    def publish(self, channel: bytes, message: bytes, needed: int = 0) -> int:
        """Send `message` to everyone listening to `channel`; how many receivers it had.

        A session subscribed to the channel and to matching patterns receives
        it once for each, and each counts, as in Redis. `needed`: the log
        offset it leaves after (0: none of its own).
        """
        return self.publish_from(None, channel, message, needed)[0]

    def publish_from(
        self, origin: Subscriber | None, channel: bytes, message: bytes, needed: int = 0
    ) -> tuple[int, bytes]:
        """`publish`, but what `origin` itself receives is returned instead of delivered.

        PUBLISH passes its own session: Redis writes the publisher's own
        message into its output ahead of PUBLISH's reply (inside EXEC's
        array too), and the connection layer writes a batch's replies at its
        end, so delivering it would overtake the replies before it.
        """
        receivers = 0
        own: list[bytes] = []
        listeners = self.channels.get(channel)
        if listeners:
            receivers = len(listeners)
            self._send(listeners, origin, own, b"3\r\n$7\r\nmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
                       % (len(channel), channel, len(message), message), needed)
        if self.patterns:
            for pattern, listeners in self._matches(channel):
                receivers += len(listeners)
                self._send(listeners, origin, own,
                           b"4\r\n$8\r\npmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
                           % (len(pattern), pattern, len(channel), channel, len(message), message),
                           needed)
        return receivers, b"".join(own)

    def _send(self, listeners: dict[Subscriber, None], origin: Subscriber | None,
              own: list[bytes], body: bytes, needed: int) -> None:
        """One frame to each listener, its header in the listener's protocol (built once each)."""
        frames: dict[int, bytes] = {}
        deliver = self.deliver
        for session in listeners:
            resp = session.resp
            frame = frames.get(resp)
            if frame is None:
                frame = frames[resp] = _HEADS[resp] + body
            if session is origin:
                own.append(frame)
            else:
                deliver(session, frame, needed)

    def _matches(self, channel: bytes) -> tuple[tuple[bytes, dict[Subscriber, None]], ...]:
        hits = self._matching.get(channel)
        if hits is None:
            hits = tuple(
                (pattern, listeners)
                for pattern, (matches, listeners) in self.patterns.items()
                if matches(channel)
            )
            if len(self._matching) >= MATCH_CACHE_MAX:
                self._matching.clear()
            self._matching[channel] = hits
        return hits

    # --- PUBSUB and INFO -----------------------------------------------------------
    def numsub(self, channel: bytes) -> int:
        """Subscribers of the channel itself (patterns not counted), as PUBSUB NUMSUB."""
        listeners = self.channels.get(channel)
        return len(listeners) if listeners else 0

    def active_channels(self, pattern: bytes | None) -> list[bytes]:
        """PUBSUB CHANNELS: channels with a subscriber, matching `pattern` if given."""
        if pattern is None:
            return list(self.channels)
        matches = compile_pattern(pattern, star_matches_empty=False)
        return [channel for channel in self.channels if matches(channel)]


def _joined(session: Subscriber) -> Subscriptions:
    subs = session.pubsub
    if subs is None:
        subs = session.pubsub = Subscriptions()
    return subs


_HEADS = {2: b"*", 3: b">"}  # an array under RESP2, a push under RESP3


def confirmation(kind: bytes, name: bytes | None, count: int, resp: int) -> bytes:
    """`[kind, name, count]`: (un)subscribe's reply for one channel or pattern.

    `name` is None when UNSUBSCRIBE / PUNSUBSCRIBE without arguments found
    nothing to leave: Redis still answers once, with a null.
    """
    null = b"$-1\r\n" if resp == 2 else b"_\r\n"
    shown = null if name is None else b"$%d\r\n%b\r\n" % (len(name), name)
    return b"%b3\r\n$%d\r\n%b\r\n%b:%d\r\n" % (_HEADS[resp], len(kind), kind, shown, count)
