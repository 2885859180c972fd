"""A queue's keys in cluster mode (emqd/cluster/names.py): the queue of a key is its hash
tag only in the emq layout, and the cluster's own keys of a queue are named apart."""

from __future__ import annotations

from emqd.cluster.names import owner_key, queue_of, written_key


def test_the_queue_of_a_key_is_its_hash_tag_only_in_the_emq_layout() -> None:
    assert queue_of(b"emq:{a}:pending") == b"a"
    assert queue_of(b"emq:{a:b}:job:1") == b"a:b"
    assert queue_of(b"emq:queues") is None and queue_of(b"x:{a}:y") is None
    assert queue_of(b"emq:{a}") is None and queue_of(b"emq:{a}x") is None
    assert owner_key(b"a") == b"emq:{a}:owner" and written_key(b"a") == b"emq:{a}:written"
