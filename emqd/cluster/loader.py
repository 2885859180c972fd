"""A queue's keys, read from the cluster into a front's store when it takes the queue.

All of a queue's keys share its hash tag, so they are in one slot:
`CLUSTER GETKEYSINSLOT` names them (with other queues' keys that share the
slot, left out). Their values are read from the slot's primary in one
pipeline on a connection of the load's own: `HGETALL` for each (every key of
the layout is a hash or a sorted set), then `ZRANGE ... WITHSCORES` for those
that answered WRONGTYPE. A hundred thousand jobs are a few round trips and
no script: Lua's `redis.call` cost the server about twice what the commands
do, and redis-py's generic packer a microsecond an argument.

The values enter the front's store as the ops that rebuild them (HSET, ZADD),
which the commit path applies unlogged (`Commit.mirror`), SLICE ops a turn of the
loop (`Front._take`): they are what the cluster already holds. A million jobs
applied at once held the loop about two seconds, long enough for the leases,
the new one's included, to run out unrenewed.
"""

from __future__ import annotations

from typing import Any

from emqd.cluster.names import REGISTRY, is_bookkeeping, owner_key, written_key
from emqd.cluster.nodes import Address, NodeError, Pipe, Topology
from emqd.cluster.ownership import slot_of
from emqd.commit.plan import Op
from emqd.wire.resp import encode_request

KEYS_MAX = 10_000_000  # GETKEYSINSLOT's count: every key of the slot
CHUNK = 20_000  # commands written before their replies are read
SLICE = 10_000  # ops the store applies between two turns of the loop, members a ZADD


async def load(topology: Topology, queue: bytes) -> tuple[list[Op], int]:
    """Every key of `queue` as the ops that rebuild it in a store, and the queue's
    `written` count. Raises OSError or TimeoutError when the cluster cannot be read
    (each step is bounded by the topology's write timeout), NodeError when a node
    refuses."""
    address, mine = await keys_in_cluster(topology, queue)
    written_raw = await topology.call(slot_of(queue), (b"GET", written_key(queue)))
    pipe = topology.connection(address)  # a load's own: its replies hold no other request
    try:
        hashes = await _pipeline(pipe, [encode_request((b"HGETALL", name)) for name in mine],
                                 topology.timeout_s)
        sets = [name for name, reply in zip(mine, hashes, strict=True)
                if isinstance(reply, NodeError) and reply.text.startswith("WRONGTYPE")]
        scored = await _pipeline(pipe, [
            encode_request((b"ZRANGE", name, b"0", b"-1", b"WITHSCORES")) for name in sets],
            topology.timeout_s)
    finally:
        pipe.close(ConnectionError("the load is done"))
    ops: list[Op] = [(b"HSET", name, *flat) for name, flat in zip(mine, hashes, strict=True)
                     if isinstance(flat, list) and flat]
    for name, flat in zip(sets, scored, strict=True):
        if isinstance(flat, list):
            ops += zadds(name, flat)
    registered = await topology.call(slot_of(REGISTRY), (b"ZSCORE", REGISTRY, queue))
    if registered is not None:
        ops.append((b"ZADD", REGISTRY, int(float(registered)), queue))
    return ops, int(written_raw or 0)


def zadds(name: bytes, flat: list[Any]) -> list[Op]:
    """ZRANGE's WITHSCORES reply (member, score, ...) as the ZADDs that rebuild the set,
    SLICE members each: a pending set of a million members is a hundred ops, each
    short enough for the front's loop to go on between them (`Front._take`)."""
    ops: list[Op] = []
    for start in range(0, len(flat), 2 * SLICE):
        pairs: list[Any] = []
        for i in range(start, min(start + 2 * SLICE, len(flat)), 2):
            pairs += [float(flat[i + 1]), flat[i]]
        ops.append((b"ZADD", name, *pairs))
    return ops


async def keys_in_cluster(topology: Topology, queue: bytes) -> tuple[Address, list[bytes]]:
    """The primary of the queue's slot, and the queue's keys it holds (its data: not the
    lease or the batch count)."""
    slot = slot_of(queue)
    address = topology.primary(slot)
    if address is None:
        await topology.refresh()
        address = topology.primary(slot)
        if address is None:
            raise ConnectionError(f"no node serves queue {queue!r}'s slot")
    names: list[bytes] = await topology.pipe(address).call(
        (b"CLUSTER", b"GETKEYSINSLOT", slot, KEYS_MAX), topology.timeout_s)
    prefix = owner_key(queue)[: -len(b"owner")]
    return address, [name for name in names
                     if name.startswith(prefix) and not is_bookkeeping(name, queue)]


async def _pipeline(pipe: Pipe, commands: list[bytes], timeout: float) -> list[Any]:
    """The replies to `commands`, sent a chunk at a time, each chunk answered within
    `timeout`; an error reply is returned as a NodeError value, not raised."""
    replies: list[Any] = []
    for start in range(0, len(commands), CHUNK):
        replies += await pipe.exchange(commands[start:start + CHUNK], timeout)
    return replies
