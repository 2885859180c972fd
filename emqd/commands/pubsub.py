"""Pub/Sub commands: (P)SUBSCRIBE, (P)UNSUBSCRIBE, PUBLISH, PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP.

Redis 7.0's replies, RESP2 and RESP3: a (un)subscribe answers one
confirmation per channel or pattern (a push frame under RESP3), already
encoded in the session's protocol of the moment. None of them touches the
keyspace or the log (Redis propagates PUBLISH to replicas only).

A RESP2 client that listens to anything is in subscribed mode: the
dispatcher asks `subscribed_mode_refusal` before running any of its
commands, and PING answers `["pong", msg]`. Under RESP3 every command is
allowed, and messages arrive as pushes between replies.

The sharded variants (SSUBSCRIBE, SPUBLISH, PUBSUB SHARDCHANNELS|SHARDNUMSUB)
are not provided: PUBSUB HELP lists what is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emqd import errors
from emqd.command import Command, command, container
from emqd.core import Session
from emqd.errors import ReplyError
from emqd.reply import Raw, Reply
from emqd.sessions.pubsub import confirmation

# What a RESP2 client in subscribed mode may still run (Redis's processCommand).
ALLOWED_WHEN_SUBSCRIBED = frozenset(
    {"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset"}
)


def subscribed_mode_refusal(session: Session, row: Command) -> ReplyError | None:
    """Called by the dispatcher for a session that listens: Redis's refusal, or None to run."""
    if session.resp == 2 and row.name not in ALLOWED_WHEN_SUBSCRIBED:
        return errors.subscribed_mode(row.name)
    return None


def subscribe(session: Session, argv: list[bytes]) -> Reply:
    """SUBSCRIBE channel [channel ...]"""
    join, resp = session.core.pubsub.subscribe, session.resp
    return Raw(b"".join(
        confirmation(b"subscribe", channel, join(session, channel), resp) for channel in argv[1:]
    ))


def psubscribe(session: Session, argv: list[bytes]) -> Reply:
    """PSUBSCRIBE pattern [pattern ...]"""
    join, resp = session.core.pubsub.psubscribe, session.resp
    return Raw(b"".join(
        confirmation(b"psubscribe", pattern, join(session, pattern), resp) for pattern in argv[1:]
    ))


def unsubscribe(session: Session, argv: list[bytes]) -> Reply:
    """UNSUBSCRIBE [channel ...]: no channel leaves every channel (the patterns stay)."""
    subs = session.pubsub
    names = argv[1:] or (list(subs.channels) if subs is not None else [])
    return _leave(session, b"unsubscribe", names, session.core.pubsub.unsubscribe)


def punsubscribe(session: Session, argv: list[bytes]) -> Reply:
    """PUNSUBSCRIBE [pattern ...]: no pattern leaves every pattern (the channels stay)."""
    subs = session.pubsub
    names = argv[1:] or (list(subs.patterns) if subs is not None else [])
    return _leave(session, b"punsubscribe", names, session.core.pubsub.punsubscribe)


def _leave(session: Session, kind: bytes, names: list[bytes],
           leave: Callable[[Session, bytes], int]) -> Raw:
    resp = session.resp
    if not names:  # nothing to leave: Redis still answers once, with a null name
        subs = session.pubsub
        return Raw(confirmation(kind, None, subs.count() if subs is not None else 0, resp))
    return Raw(b"".join(confirmation(kind, name, leave(session, name), resp) for name in names))


def publish(session: Session, argv: list[bytes]) -> Reply:
    """PUBLISH channel message: the number of receivers.

    A publisher that listens to the channel gets its own message ahead of
    the reply, as in Redis (RESP3; or inside EXEC under RESP2).
    """
    receivers, own = session.core.pubsub.publish_from(session, argv[1], argv[2])
    if own:
        return Raw(own + b":%d\r\n" % receivers)
    return receivers


# --- PUBSUB ------------------------------------------------------------------------
def pubsub_channels(session: Session, argv: list[bytes]) -> Reply:
    """PUBSUB CHANNELS [pattern]"""
    if len(argv) > 3:
        raise errors.subcommand_syntax(argv[1], "pubsub")
    return session.core.pubsub.active_channels(argv[2] if len(argv) == 3 else None)


def pubsub_numsub(session: Session, argv: list[bytes]) -> Reply:
    """PUBSUB NUMSUB [channel ...]: a flat array of channel, count (a map in neither protocol)."""
    numsub = session.core.pubsub.numsub
    reply: list[Any] = []
    for channel in argv[2:]:
        reply += [channel, numsub(channel)]
    return reply


def pubsub_numpat(session: Session, argv: list[bytes]) -> Reply:
    """PUBSUB NUMPAT: patterns with a subscriber (each counted once)."""
    return len(session.core.pubsub.patterns)


HELP = [
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "HELP",
    "    Prints this help.",
]


def pubsub_help(session: Session, argv: list[bytes]) -> Reply:
    """Redis 7.0's text, without the sharded subcommands emqd does not have."""
    return HELP


_PS = "pubsub"
COMMANDS = [
    command("subscribe", -2, "pubsub noscript loading stale", subscribe, group=_PS,
            summary="Listen for messages published to the given channels"),
    command("unsubscribe", -1, "pubsub noscript loading stale", unsubscribe, group=_PS,
            summary="Stop listening for messages posted to the given channels"),
    command("psubscribe", -2, "pubsub noscript loading stale", psubscribe, group=_PS,
            summary="Listen for messages published to channels matching the given patterns"),
    command("punsubscribe", -1, "pubsub noscript loading stale", punsubscribe, group=_PS,
            summary="Stop listening for messages posted to channels matching the given patterns"),
    command("publish", 3, "pubsub loading stale fast", publish, group=_PS,
            summary="Post a message to a channel"),
    container("pubsub", "", _PS,
              "A container for Pub/Sub commands"),
]

SUBCOMMANDS = {
    "pubsub": [
        command("pubsub|help", 2, "loading stale", pubsub_help, group=_PS,
                summary="Show helpful text about the different subcommands"),
        command("pubsub|numpat", 2, "pubsub loading stale", pubsub_numpat, group=_PS,
                summary="Get the count of unique patterns pattern subscriptions"),
        command("pubsub|channels", -2, "pubsub loading stale", pubsub_channels, group=_PS,
                summary="List active channels"),
        command("pubsub|numsub", -2, "pubsub loading stale", pubsub_numsub, group=_PS,
                summary="Get the count of subscribers for channels"),
    ],
}
