"""Moving a single emqd's queues into a cluster:

    emqd --dir DIR --migrate-to-cluster HOST:PORT[,HOST:PORT...]

Run once, with the single process stopped (its directory is locked while this
runs) and before any front serves the queues. The append-only file is read as
a start reads it (persist/load.py), and each queue's keys go into the cluster
as they are: the layout is the same in both (`emq:{QUEUE}:...`, one hash slot a
queue). Each queue is written as one script call (`scripts.RESTORE`, the
cluster sink's write-back) under a lease this migration takes for it, so that
no front can take the queue half written; then the lease is let go and the
queue entered in the registry. The fronts take the queues as they are asked
for, their ids, tokens and epochs going on where the single process left them
(a lease it granted is recovered uncounted, as after a restart).

Refused, writing nothing: a queue the cluster has already (the registry names
it, or a front holds it), and a flow across queues (a job whose parent is in
another queue: cluster mode keeps a flow in one queue, docs/CLUSTER.md). Keys
outside the queues are left out, and listed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from emqd.cluster import scripts
from emqd.cluster.names import REGISTRY, owner_key, queue_of, written_key
from emqd.cluster.nodes import FAILED, Topology, parse_address
from emqd.cluster.ownership import new_term, owner_value, slot_of
from emqd.cluster.sink import Batch, QueueLog, restore_ops
from emqd.layout import QUEUES, queue_keys
from emqd.persist.aof import FILENAME
from emqd.persist.dirlock import lock_dir
from emqd.persist.load import load
from emqd.store import hash as hashes
from emqd.store.keyspace import Keyspace

LEASE_MS = 60_000  # the migration's hold on a queue while it writes it
ADDRESS = b"migration"  # the owner value's address: no front's, so nobody forwards there


class Refused(Exception):
    """What keeps the migration from writing anything."""


def queues_of(keyspace: Keyspace) -> tuple[dict[bytes, list[tuple[bytes, Any]]], list[bytes]]:
    """Each queue's keys with their values, and the keys outside the queues."""
    queues: dict[bytes, list[tuple[bytes, Any]]] = {}
    outside: list[bytes] = []
    for key, value in keyspace.with_prefix(b""):
        queue = queue_of(key)
        if key == QUEUES:
            continue  # the registry: written apart, with each queue
        if queue is None:
            outside.append(key)
        else:
            queues.setdefault(queue, []).append((key, value))
    return queues, outside


def flows_across(queues: dict[bytes, list[tuple[bytes, Any]]]) -> list[tuple[bytes, bytes]]:
    """(a child's row key, its parent's row key) for each flow whose parent is in another
    queue than its child."""
    across = []
    for queue, items in queues.items():
        prefix = queue_keys(queue).job_prefix
        for key, value in items:
            if not key.startswith(prefix):
                continue
            parent = hashes.get(value, b"parent") if type(value) is bytes else \
                value.get(b"parent")
            if parent and queue_of(parent) != queue:
                across.append((key, parent))
    return across


async def migrate(keyspace: Keyspace, seeds: str, timeout_s: float,
                  auth: tuple[bytes, ...] = ()) -> list[bytes]:
    """Write every queue of `keyspace` into the cluster at `seeds`; the queues written.
    Raises Refused (nothing written), or the cluster's errors."""
    queues, _ = queues_of(keyspace)
    across = flows_across(queues)
    if across:
        shown = ", ".join(f"{c.decode('latin-1')} -> {p.decode('latin-1')}"
                          for c, p in across[:5])
        raise Refused(f"{len(across)} job(s) of a flow across queues ({shown}): cluster mode "
                      "keeps a flow in one queue; finish or remove them first")
    topology = Topology([parse_address(part) for part in seeds.split(",")], timeout_s, auth)
    try:
        if not await topology.refresh():
            raise ConnectionError(f"no node at {seeds} answered with a slot map")
        taken = [queue for queue in queues if await _in_cluster(topology, queue)]
        if taken:
            raise Refused(f"the cluster has queue(s) {b', '.join(taken[:5]).decode('latin-1')} "
                          "already")
        registry = keyspace.zset(QUEUES)
        for queue, items in queues.items():
            created = registry.score(queue) if registry is not None else None
            await _write(topology, queue, items, created)
        return list(queues)
    finally:
        topology.close()


async def _in_cluster(topology: Topology, queue: bytes) -> bool:
    registered = await topology.call(slot_of(REGISTRY), (b"ZSCORE", REGISTRY, queue))
    owner = await topology.call(slot_of(queue), (b"EXISTS", owner_key(queue), written_key(queue)))
    return registered is not None or bool(owner)


async def _write(topology: Topology, queue: bytes, items: list[tuple[bytes, Any]],
                 created: float | None) -> None:
    value = owner_value(new_term(), ADDRESS)
    slot = slot_of(queue)
    if not await topology.call(slot, (b"SET", owner_key(queue), value, b"NX", b"PX", LEASE_MS)):
        raise Refused(f"a front took queue {queue!r} meanwhile")
    batch = Batch()
    batch.restore_with(*restore_ops([], items))
    pipe = topology.pipe(topology.primary(slot) or topology.seeds[0])
    reply = (await pipe.exchange([QueueLog(queue, value, 0).command(batch)],
                                 topology.timeout_s * 10))[0]
    if isinstance(reply, Exception):
        raise reply
    await topology.call(slot, (b"EVAL", scripts.RELEASE, 1, owner_key(queue), value))
    at = int(created) if created is not None else 0
    await topology.call(slot_of(REGISTRY), (b"ZADD", REGISTRY, b"NX", at, queue))


def main(directory: str, seeds: str, timeout_s: float = 5.0,
         auth: tuple[bytes, ...] = ()) -> int:
    """`emqd --migrate-to-cluster`: 0 when every queue was written."""
    lock = lock_dir(directory)  # no emqd may run on it meanwhile
    try:
        keyspace = Keyspace()
        load(os.path.join(directory, FILENAME), keyspace)
        queues, outside = queues_of(keyspace)
        written = asyncio.run(migrate(keyspace, seeds, timeout_s, auth))
    except (Refused, OSError, *FAILED) as exc:
        print(f"emqd: not migrated: {exc}", file=sys.stderr)
        return 1
    finally:
        if lock is not None:
            os.close(lock)
    print(f"emqd: {len(written)} queue(s) written into the cluster at {seeds}")
    if outside:
        print(f"emqd: left out {len(outside)} key(s) outside the queues: "
              f"{b', '.join(outside[:10]).decode('latin-1')}", file=sys.stderr)
    return 0
