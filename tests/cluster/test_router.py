"""Which queue a request is about, in cluster mode (emqd/cluster/router.py `queue_of`):
its verb's first argument, or its keys' hash tag; a request across queues or slots, or
mixing a queue's keys with others, is refused; keys outside the queues go to the cluster."""

from __future__ import annotations

from emqd.cluster.router import OUTSIDE, ClusterRouter
from emqd.command import command
from emqd.dispatch import TABLE
from emqd.errors import ReplyError


def queue(*argv: bytes) -> object:
    router = ClusterRouter(None)  # type: ignore[arg-type]  # (queue_of asks the front nothing)
    name = argv[0].lower()
    # (a command of Redis's with movable keys, whether or not this build serves it)
    row = TABLE.get(name) or command(name.decode(), -4, "write", lambda s, a: None, (1, 1, 1))
    return router.queue_of(row, list(argv))


def test_a_request_names_its_queue_by_its_verb_or_its_keys_hash_tag() -> None:
    assert queue(b"EMQ.ADD", b"mail", b"x") == b"mail"
    assert queue(b"HGETALL", b"emq:{mail}:job:1") == b"mail"
    assert queue(b"DEL", b"emq:{mail}:a", b"emq:{mail}:b") == b"mail"
    assert queue(b"ZUNIONSTORE", b"emq:{m}:d", b"2", b"emq:{m}:a", b"emq:{m}:b") == b"m"
    assert queue(b"PING") is None and queue(b"EMQ.QUEUES") is None
    assert queue(b"INFO", b"server") is None


def test_a_request_across_queues_or_outside_them_is_refused() -> None:
    crossed = queue(b"DEL", b"emq:{a}:x", b"emq:{b}:x")
    assert isinstance(crossed, ReplyError) and crossed.message.startswith(b"CROSSSLOT")
    counted = queue(b"ZUNIONSTORE", b"emq:{a}:d", b"2", b"emq:{a}:x", b"emq:{b}:y")
    assert isinstance(counted, ReplyError) and counted.message.startswith(b"CROSSSLOT")
    mixed = queue(b"DEL", b"emq:{a}:x", b"plain")
    assert isinstance(mixed, ReplyError) and mixed.message.startswith(b"CROSSSLOT")
    slots = queue(b"DEL", b"plain", b"other")  # two slots outside the queues
    assert isinstance(slots, ReplyError) and slots.message.startswith(b"CROSSSLOT")
    assert queue(b"HSET", b"plain", b"f", b"v") is OUTSIDE  # to the cluster itself
