"""A queue's keys, read from the cluster into a front's store when it takes the queue.

All of a queue's keys share its hash tag, so they are in one slot:
`CLUSTER GETKEYSINSLOT` names them (with other queues' keys that share the
slot, left out), and `scripts.DUMP` reads their values a slice at a time, in
one round trip each. They enter the keyspace as the ops that rebuild them
(HSET, ZADD), not through the commit path: they are what the cluster already
holds. `written` (how many batches the queue's owners applied) comes with
them, in the same script call as the first slice, so the two agree.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from emqd.cluster import scripts
from emqd.cluster.names import REGISTRY, is_bookkeeping, owner_key, written_key
from emqd.plan import Op
from emqd.store.keyspace import Keyspace

SLICE = 2000  # keys read per script call
KEYS_MAX = 10_000_000  # GETKEYSINSLOT's count: every key of the slot


async def load(client: RedisCluster, queue: bytes, keyspace: Keyspace) -> int:
    """Read every key of `queue` into `keyspace` (which holds none of them); the queue's
    `written` count. Raises RedisError when the cluster cannot be read."""
    slot = key_slot(owner_key(queue))
    node = client.nodes_manager.get_node_from_slot(slot)
    names: list[bytes] = await client.execute_command(
        "CLUSTER", "GETKEYSINSLOT", slot, KEYS_MAX, target_nodes=node)
    prefix = owner_key(queue)[: -len(b"owner")]
    mine = [name for name in names if name.startswith(prefix)
            and not is_bookkeeping(name, queue)]
    written_raw = await client.get(written_key(queue))
    ops: list[Op] = []
    for start in range(0, len(mine), SLICE):
        part = mine[start:start + SLICE]
        # (target_nodes: the client would hash every key to check they share the slot)
        dumped: Any = await client.execute_command("EVAL", scripts.DUMP, len(part), *part,
                                                   target_nodes=node)
        for name, (kind, flat) in zip(part, dumped, strict=True):
            ops += _rebuild(name, kind, flat)
    registered = await client.zscore(REGISTRY, queue)
    if registered is not None:
        ops.append((b"ZADD", REGISTRY, int(registered), queue))
    keyspace.apply(ops)
    return int(written_raw or 0)


def _rebuild(name: bytes, kind: bytes, flat: list[bytes]) -> list[Op]:
    """The op that makes `name` hold what the cluster holds (nothing for an empty or
    foreign value: a queue's keys are hashes and sorted sets)."""
    if not flat:
        return []
    if kind == b"hash":
        return [(b"HSET", name, *flat)]
    if kind == b"zset":
        pairs: list[Any] = []
        for i in range(0, len(flat), 2):
            pairs += [float(flat[i + 1]), flat[i]]
        return [(b"ZADD", name, *pairs)]
    return []
