"""FLUSHALL and the DEL of a big value let go of their values at once and free them in
slices (Keyspace.discard / free): the command costs a fraction of the million
deallocations it causes, and the loop frees a slice a turn (emqd/serve/lifecycle.py)."""

from __future__ import annotations

import asyncio
import sys

from emqd.commit.plan import Plan
from emqd.config import Config
from emqd.serve.lifecycle import FREE_PER_TURN, Server
from emqd.store.keyspace import FREE_WHOLE, Keyspace


def filled(on_garbage: bool = True) -> Keyspace:
    space = Keyspace()
    if on_garbage:
        space.on_garbage = lambda: None  # the server's hook; here the test calls free()
    space.apply([(b"HSET", b"job:%d" % i, b"state", b"pending", b"payload", b"p%d" % i)
                 for i in range(20_000)])
    space.apply([(b"ZADD", b"pending", *(x for i in range(30_000) for x in (i, b"m%d" % i)))])
    space.apply([(b"HSET", b"big", *(x for i in range(10_000) for x in (b"f%d" % i, b"v%d" % i)))])
    return space


def drained(space: Keyspace, budget: int) -> int:
    calls = 1
    while space.free(budget):
        calls += 1
        assert calls < 10_000
    return calls


def test_flushall_lets_go_at_once_and_free_takes_it_slice_by_slice() -> None:
    space = filled()
    before = sys.getallocatedblocks()
    space.apply([(b"FLUSHALL",)])
    assert space.data == {} and len(space) == 0
    assert before - sys.getallocatedblocks() < 1_000  # nothing much freed by the command
    assert drained(space, 5_000) > 10  # in slices: ~160,000 objects, 5,000 a call
    assert before - sys.getallocatedblocks() > 100_000  # and in the end all of it
    assert space.parts == [] and space.dropped == []


def test_without_the_servers_hook_everything_goes_at_once() -> None:
    space = filled(on_garbage=False)
    before = sys.getallocatedblocks()
    space.apply([(b"FLUSHALL",)])
    assert space.dropped == [] and space.data == {}
    assert before - sys.getallocatedblocks() > 100_000


def test_a_big_value_deleted_is_freed_in_slices_a_small_one_at_once() -> None:
    space = filled()
    space.apply([(b"DEL", b"job:1", b"big")])
    assert len(space.dropped) == 1 and len(space.dropped[0]) == 1  # big, not job:1
    space.apply([(b"ZREM", b"pending", *(b"m%d" % i for i in range(30_000 - FREE_WHOLE)))])
    space.apply([(b"DEL", b"pending")])  # FREE_WHOLE members left: freed at once
    assert len(space.dropped) == 1
    assert drained(space, 1_000) > 10  # the hash's 10,000 fields and values, in slices
    assert len(space) == 20_000 - 1


def test_a_value_someone_else_holds_stays_whole() -> None:
    """A compaction in progress keeps the values of its snapshot (persist/rewrite.py):
    freeing lets go of them and changes nothing in them."""
    space = filled()
    snapshot = dict(space.data)
    copies = {key: dict(value) if type(value) is not bytes else value
              for key, value in snapshot.items() if key != b"pending"}
    members = list(snapshot[b"pending"].members())
    space.apply([(b"FLUSHALL",)])
    drained(space, 1_000)
    assert list(snapshot[b"pending"].members()) == members
    assert {key: dict(value) if type(value) is not bytes else value
            for key, value in snapshot.items() if key != b"pending"} == copies


async def test_the_server_frees_a_slice_per_loop_turn() -> None:
    server = Server(Config(appendonly=False, http_port=0))
    keyspace = server.core.keyspace
    keyspace.on_garbage = server.schedule_free  # as Server.start sets it
    keyspace.apply([(b"HSET", b"k%d" % i, b"f", b"v") for i in range(3 * FREE_PER_TURN)])
    server.core.commit.apply(Plan([(b"FLUSHALL",)]))
    assert len(keyspace) == 0 and keyspace.dropped
    turns = 0
    while keyspace.dropped or keyspace.parts:
        await asyncio.sleep(0)
        turns += 1
        assert turns < 100
    assert turns >= 6  # keys and values, FREE_PER_TURN a turn
