"""SCAN, HSCAN and ZSCAN keep Redis's promise under random writes between calls: a model.

Each example fills a collection (the keyspace, a big hash or a big sorted set), runs one
scan to its end through the dispatcher, in process, and between its calls makes random
writes: members come and go, sorted-set members change score (a score order would lose
a member moved behind the cursor), the index is dropped (as a write budget or another
scan's end drops it) and built again at another size. Checked: the scan ends; every
member present for the whole scan was returned, and exactly once while the collection
stayed big; nothing was returned that never was a member; a returned value or score is
the one of that moment. The constants are shrunk so that a few dozen members are a big
collection whose index takes several calls to build.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.compat import scan
from emqd.store import scan_index
from tests.http.inprocess import Local

MAX_CALLS = 2_000
MAX_DROPS = 3  # index drops per scan: more often than a whole scan would be a livelock
POOL = [b"m%d" % i for i in range(120)]


@pytest.fixture(autouse=True)
def small_constants() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan, "SMALL", 4)
        patch.setattr(scan, "BUILD_STEP", 5)
        patch.setattr(scan, "CHUNK", 2)
        patch.setattr(scan_index, "TARGET", 2)
        yield


class Collection:
    """One collection under scan, its model (member -> value or score), and its writes."""

    def __init__(self, kind: str, members: set[bytes]) -> None:
        self.kind = kind
        self.local = Local()
        self.local.keyspace.limits.hash_entries = 1  # every hash and set is a hashtable /
        self.local.keyspace.limits.zset_entries = 1  # skiplist to Redis: scanned by cursor
        self.model: dict[bytes, bytes] = {}
        self.version = 0
        if kind == "hscan":
            members = members | set(POOL[:40])  # a BigHash has more than 32 fields
        for i, member in enumerate(sorted(members)):
            self.put(member, i)

    def run(self, *argv: Any) -> Any:
        reply = self.local.run(*argv)
        assert not isinstance(reply, Exception), reply
        return reply

    def put(self, member: bytes, score: int = 0) -> None:
        """Add `member`, or give it a new value, or `score` (a set's order moves with it)."""
        self.version += 1
        value = b"%d" % (score if self.kind == "zscan" else self.version)
        if self.kind == "scan":
            self.run("HSET", member, "f", value)  # a new value: the key stays
        elif self.kind == "hscan":
            self.run("HSET", "h", member, value)
        else:
            self.run("ZADD", "z", value, member)
        self.model[member] = value

    def remove(self, member: bytes) -> None:
        if self.kind == "scan":
            self.run("DEL", member)
        elif self.kind == "hscan":
            self.run("HDEL", "h", member)
        else:
            self.run("ZREM", "z", member)
        del self.model[member]

    def call(self, cursor: bytes, count: int) -> tuple[bytes, list[bytes]]:
        """One scan call: the next cursor and the members, each value checked against now."""
        if self.kind == "scan":
            next_cursor, keys = self.run("SCAN", cursor, "COUNT", count)
            return next_cursor, keys
        key = "h" if self.kind == "hscan" else "z"
        next_cursor, flat = self.run(self.kind.upper(), key, cursor, "COUNT", count)
        members = flat[::2]
        for member, value in zip(members, flat[1::2], strict=True):
            expected = self.model[member]
            assert value == expected or float(value) == float(expected), (member, value)
        return next_cursor, members

    def owner(self) -> Any:
        if self.kind == "scan":
            return self.local.keyspace
        value = self.local.keyspace.data.get(b"h" if self.kind == "hscan" else b"z")
        return None if isinstance(value, bytes) else value  # a listpack holds no index


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["scan", "hscan", "zscan"]),
       initial=st.sets(st.sampled_from(POOL), max_size=60),
       data=st.data())
def test_every_member_present_for_the_whole_scan_is_returned(kind: str, initial: set[bytes],
                                                            data: st.DataObject) -> None:
    collection = Collection(kind, initial)
    big_at_start = len(collection.model) > scan.SMALL
    present = set(collection.model)  # members present for the whole scan, so far
    ever = set(collection.model)
    seen: list[bytes] = []
    stayed_big = True
    cursor, drops = b"0", 0
    for _ in range(MAX_CALLS):
        cursor, members = collection.call(cursor, data.draw(st.integers(1, 6), "count"))
        assert set(members) <= set(collection.model)
        seen += members
        if cursor == b"0":
            break
        for _ in range(data.draw(st.integers(0, 4), "writes")):
            what = data.draw(st.sampled_from(["add", "remove", "rewrite", "drop"]), "write")
            score = data.draw(st.integers(-5, 70), "score")
            if what == "add":
                member = data.draw(st.sampled_from(POOL), "member")
                collection.put(member, score)
                ever.add(member)
            elif what in ("remove", "rewrite") and collection.model:
                member = data.draw(st.sampled_from(sorted(collection.model)), "which")
                if what == "remove" and len(collection.model) > 1:
                    collection.remove(member)
                    present.discard(member)
                else:
                    collection.put(member, score)  # a new value, or score: the member stays
            elif what == "drop" and drops < MAX_DROPS and collection.owner() is not None:
                collection.owner().scan = None
                drops += 1
        stayed_big = stayed_big and len(collection.model) > scan.SMALL
    else:
        pytest.fail(f"{kind} did not reach cursor 0 in {MAX_CALLS} calls")
    assert present <= set(seen)
    assert set(seen) <= ever
    if big_at_start and stayed_big:
        assert sorted(m for m in seen if m in present) == sorted(present)  # none twice
    owner = collection.owner()
    assert owner is None or owner.scan is None  # the scan's end dropped its index
