"""Which queue a key belongs to, and the cluster's own keys of a queue.

A queue's keys share the hash tag `{QUEUE}` (emqd/layout.py), so they live in one
hash slot of the cluster: the unit a front owns and writes atomically. Two keys
beside the queue's data serve cluster mode only, and are never loaded into a
front's store: `owner` (the lease: its term and the owner's address) and
`written` (how many batches of writes the queue's owners have applied: a retry
of a batch the cluster already took is recognised, not applied twice).
"""

from __future__ import annotations

from typing import Final

from emqd.config import Config
from emqd.errors import Refusal
from emqd.layout import QUEUES

PREFIX: Final = b"emq:{"
REGISTRY: Final = QUEUES  # the registry of queues: in its own slot, written apart (sink.py)
FRONTS: Final = b"emq:fronts"  # zset: each front's address -> its last heartbeat (ms)
# zset: queues nobody owns -> when their clock work is next due (ms), written by the front
# that let each go, so that the front a queue belongs to takes it then (front.py)
DUES: Final = b"emq:dues"
# A front that does not own the queue (any more), before anything ran: a forwarded
# request is never forwarded on, and the front that forwarded it looks the owner up again
# (router.py); a plan of a queue let go meanwhile is refused before it is applied (sink.py).
NOT_OWNER: Final = Refusal("TRYAGAIN this front does not own the queue; retry")


def queue_of(key: bytes) -> bytes | None:
    """The queue a key belongs to (`emq:{QUEUE}:...`), or None for any other key."""
    if not key.startswith(PREFIX):
        return None
    end = key.find(b"}", len(PREFIX))
    if end < 0 or end + 1 >= len(key) or key[end + 1] != 0x3A:  # b":"
        return None
    return key[len(PREFIX):end]


def owner_key(queue: bytes) -> bytes:
    return PREFIX + queue + b"}:owner"


def written_key(queue: bytes) -> bytes:
    return PREFIX + queue + b"}:written"


CLUSTER_KEYS: Final = (b"emq:queues", b"emq:fronts", b"emq:dues")  # and their `:...` kin
CLUSTER_PREFIXES: Final = (b"emq:fronts:", b"emq:owned:")


def is_cluster_key(key: bytes) -> bool:
    """One of the fronts' own keys outside the queues (the registries, the owned sets,
    the due times): a client may read them, never write them."""
    return key in CLUSTER_KEYS or key.startswith(CLUSTER_PREFIXES)


def is_bookkeeping(key: bytes, queue: bytes) -> bool:
    """One of the cluster's own keys of the queue (not data a front holds)."""
    return key == owner_key(queue) or key == written_key(queue)


def front_address(config: Config) -> bytes:
    """Where other fronts reach this one: --cluster-announce, else --bind:--port."""
    return (config.cluster_announce or f"{config.bind}:{config.port}").encode()
