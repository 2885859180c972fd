"""A queue's sorted sets as the loader rebuilds them (emqd/cluster/loader.py): a big one
in slices a turn of the front's loop each, which build the very set one ZADD would."""

from __future__ import annotations

from emqd.cluster.loader import SLICE, zadds
from emqd.store.keyspace import Keyspace


def withscores(count: int) -> list[bytes]:
    """ZRANGE ... WITHSCORES as a node answers it: member, score, member, score, ..."""
    flat: list[bytes] = []
    for i in range(count):
        flat += [b"%d" % i, b"%d" % (i * 7 % 1000) if i % 3 else b"-1.5"]
    return flat


def test_a_big_set_is_rebuilt_in_slices_that_make_the_same_set_as_one_zadd() -> None:
    flat = withscores(2 * SLICE + 1)
    ops = zadds(b"emq:{q}:pending", flat)
    assert len(ops) == 3
    assert all(len(op) - 2 <= 2 * SLICE for op in ops)
    sliced, whole = Keyspace(), Keyspace()
    sliced.apply(ops)
    whole.apply([(b"ZADD", b"emq:{q}:pending",
                  *(x for i in range(0, len(flat), 2) for x in (float(flat[i + 1]), flat[i])))])
    got, want = sliced.zset(b"emq:{q}:pending"), whole.zset(b"emq:{q}:pending")
    assert got is not None and want is not None
    assert list(got) == list(want) and len(got) == 2 * SLICE + 1


def test_a_small_set_is_one_zadd_and_an_empty_reply_none() -> None:
    assert zadds(b"s", [b"a", b"1", b"b", b"2.5"]) == [(b"ZADD", b"s", 1.0, b"a", 2.5, b"b")]
    assert zadds(b"s", []) == []
