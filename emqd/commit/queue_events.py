"""Each queue's transitions on Redis Pub/Sub: `emq:{QUEUE}:events`, one JSON object a message.

`publisher(pubsub, sink)` makes the commit path's listener (emqd/commit/events.py,
`Commit.listen`) that gets each committed plan's events, in plan order, after
the plan was applied and handed to the sink. For each event whose channel
someone listens to (a subscriber of the channel, or of a pattern matching it:
`PubSub.wants`), it publishes

    {"event": "claimed", "id": "1", "ts": 1700000000000, "token": "1", "wait_ms": 3}

`event`, then `id` (left out for the queue-wide `paused` and `resumed`), `ts`
(the plan's time, ms), then the event's own fields in the order events.py
lists them. When nobody listens to anything it returns at its first line, so
a server without subscribers pays a call and two dict checks per plan (a
closure, which costs half what a call of an instance's `__call__` costs).

A message must not tell of a write that a crash could still lose: it is
handed over with the sink's `appended` offset of the moment (which covers the
plan it reports), and leaves, like a reply, only once the sink holds that
much durably (emqd/commit/path.py `send`).

Bytes in JSON: ids, tokens, errors and progress values are the clients' own
bytes. Each is decoded as UTF-8; a byte that is not part of valid UTF-8 is
kept as a lone surrogate (U+DC80 to U+DCFF, Python's `surrogateescape`), which
the JSON text spells as an escape (`"\\udcff"`), the output being ASCII. So
text reads as text, and any bytes round trip exactly: the Python client
(emqd/client) decodes ids the same way and sends them back as the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from emqd.commit.events import Event, Listener
from emqd.commit.sink import Sink
from emqd.layout import queue_keys
from emqd.sessions.pubsub import PubSub


def publisher(pubsub: PubSub, sink: Sink) -> Listener:
    """The listener that publishes events on their queues' channels, each once `sink`
    holds the plan it reports."""

    def publish(happened: list[Event]) -> None:
        if not pubsub.channels and not pubsub.patterns:
            return
        needed = sink.appended
        for event in happened:
            channel = queue_keys(event[1]).events
            if pubsub.wants(channel):
                pubsub.publish(channel, message(event), needed)

    return publish


def message(event: Event) -> bytes:
    """The JSON text of one event (see the module's docstring)."""
    name, _queue, job_id, ts, extra = event
    body: dict[str, Any] = {"event": name}
    if job_id:
        body["id"] = _text(job_id)
    body["ts"] = ts
    if extra:
        for field, value in extra.items():
            body[field] = _text(value) if isinstance(value, bytes) else value
    return json.dumps(body, separators=(",", ":")).encode()


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
