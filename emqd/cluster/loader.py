"""A queue's keys, read from the cluster into a front's store when it takes the queue.

All of a queue's keys share its hash tag, so they are in one slot:
`CLUSTER GETKEYSINSLOT` names them (with other queues' keys that share the
slot, left out). Their values are read from the slot's primary in one
pipeline on a connection of the load's own: `HGETALL` for each (every key of
the layout is a hash or a sorted set), then `ZRANGE ... WITHSCORES` for those
that answered WRONGTYPE. A hundred thousand jobs are a few round trips and
no script: Lua's `redis.call` cost the server about twice what the commands
do, and redis-py's generic packer a microsecond an argument.

The values enter the keyspace as the ops that rebuild them (HSET, ZADD), not
through the commit path: they are what the cluster already holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from emqd.cluster.names import REGISTRY, is_bookkeeping, owner_key, written_key
from emqd.plan import Op
from emqd.store.keyspace import Keyspace
from emqd.wire.resp import encode_request

KEYS_MAX = 10_000_000  # GETKEYSINSLOT's count: every key of the slot
CHUNK = 20_000  # commands written before their replies are read
_WRONGTYPE = b"WRONGTYPE"


async def load(client: RedisCluster, queue: bytes, keyspace: Keyspace) -> int:
    """Read every key of `queue` into `keyspace` (which holds none of them); the queue's
    `written` count. Raises RedisError or OSError when the cluster cannot be read."""
    node, mine = await keys_in_cluster(client, queue)
    written_raw = await client.get(written_key(queue))
    reader, writer = await asyncio.open_connection(node.host, node.port)
    try:
        hashes = await _pipeline(reader, writer,
                                 [encode_request((b"HGETALL", name)) for name in mine])
        sets = [name for name, reply in zip(mine, hashes, strict=True)
                if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("WRONGTYPE")]
        scored = await _pipeline(reader, writer, [
            encode_request((b"ZRANGE", name, b"0", b"-1", b"WITHSCORES")) for name in sets])
    finally:
        writer.close()
    ops: list[Op] = [(b"HSET", name, *flat) for name, flat in zip(mine, hashes, strict=True)
                     if isinstance(flat, list) and flat]
    for name, flat in zip(sets, scored, strict=True):
        if isinstance(flat, list) and flat:
            pairs: list[Any] = []
            for i in range(0, len(flat), 2):
                pairs += [float(flat[i + 1]), flat[i]]
            ops.append((b"ZADD", name, *pairs))
    registered = await client.zscore(REGISTRY, queue)
    if registered is not None:
        ops.append((b"ZADD", REGISTRY, int(registered), queue))
    keyspace.apply(ops)
    return int(written_raw or 0)


async def keys_in_cluster(client: RedisCluster, queue: bytes) -> tuple[ClusterNode, list[bytes]]:
    """The primary of the queue's slot, and the queue's keys it holds (its data: not the
    lease or the batch count)."""
    slot = key_slot(owner_key(queue))
    node = client.nodes_manager.get_node_from_slot(slot)
    names: list[bytes] = await client.execute_command(
        "CLUSTER", "GETKEYSINSLOT", slot, KEYS_MAX, target_nodes=node)
    prefix = owner_key(queue)[: -len(b"owner")]
    return node, [name for name in names
                  if name.startswith(prefix) and not is_bookkeeping(name, queue)]


async def _pipeline(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    commands: list[bytes]) -> list[Any]:
    """The replies to `commands`, sent a chunk at a time; an error reply is returned as
    hiredis's ReplyError, not raised."""
    parser = hiredis.Reader(replyError=hiredis.ReplyError)
    replies: list[Any] = []
    for start in range(0, len(commands), CHUNK):
        chunk = commands[start:start + CHUNK]
        writer.write(b"".join(chunk))
        wanted = len(replies) + len(chunk)
        while len(replies) < wanted:
            reply = parser.gets()
            if reply is False:
                data = await reader.read(1 << 20)
                if not data:
                    raise ConnectionError("the cluster closed the connection mid-load")
                parser.feed(data)
                continue
            replies.append(reply)
    return replies
