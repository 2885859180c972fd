"""Where a request runs in cluster mode: here, at the queue's owner front, or nowhere.

The dispatcher asks `route` before it runs a request (emqd/dispatch.py). A
request names its queue by its first argument (an EMQ verb) or by its keys'
hash tag (a plain command on `emq:{QUEUE}:...`); a request without keys
(PING, INFO, CLIENT, ...) runs here. Then:

- this front holds the queue's lease: it runs here (None);
- nobody holds it: this front takes it (front.py `adopt`: the lease, then the
  queue's keys into the store), and the request runs here once it is loaded;
- another front holds it: the request is forwarded to that front, on a
  connection of this client's own (`Link`: its requests stay in order, and a
  blocking one blocks only it), and the owner's reply bytes come back as they
  are;
- it names keys outside the queues (`HSET app:settings ...`), all in one slot:
  it goes to the cluster itself, to the primary of that slot, on a
  connection of this client's own, and the cluster's reply comes back as it is;
- it spans queues or slots (`CROSSSLOT`), or mixes a queue's keys with others:
  refused.

The three middle cases answer `Later` (emqd/plan.py): the client's requests
stop until the reply comes (`AGAIN`: run it here now). A forwarded request is
marked (`EMQ.FRONT` on the link's connection), so that a front that lost the
queue in between answers TRYAGAIN instead of forwarding it on; the
forwarding front then looks the owner up again, within `cluster_timeout_ms`
plus the lease's time (a dead owner's lease must run out first).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from emqd import errors
from emqd.cluster.names import queue_of
from emqd.cluster.ownership import Leases, address_of
from emqd.cluster.sink import CROSSSLOT, ClusterSink
from emqd.command import Command
from emqd.dispatch import lookup
from emqd.plan import AGAIN, Later
from emqd.reply import Raw
from emqd.session import Session
from emqd.wire.resp import encode_request, reply_end

log = logging.getLogger("emqd")

RESOLVE_PAUSE_S = 0.05  # between two looks at a queue's owner, doubled up to a second
NO_QUEUE = frozenset({"emq.queues", "emq.front"})  # EMQ commands that name no queue
# Plain commands whose keys are counted by an argument (Redis's movable keys):
# name -> (index of the count, index of the first key, keys before the count).
_COUNTED_KEYS = {
    "zunionstore": (2, 3, 1), "zinterstore": (2, 3, 1), "zdiffstore": (2, 3, 1),
    "zunion": (1, 2, 0), "zinter": (1, 2, 0), "zdiff": (1, 2, 0), "zintercard": (1, 2, 0),
    "zmpop": (1, 2, 0), "bzmpop": (2, 3, 0),
}
OUTSIDE = errors.ReplyError("OUTSIDE")  # queue_of's answer for keys outside the queues
NOT_HERE = errors.Refusal(
    "TRYAGAIN this front does not own the queue (a forwarded request is never forwarded "
    "on); retry")


class Link:
    """One client's connection to another front (or to a node of the cluster), for the
    requests it sends there; `front` says which: a front is told it is forwarded to."""

    def __init__(self, address: bytes, resp: int, front: bool = True) -> None:
        self.address = address
        self.resp = resp
        self.front = front
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.buffer = bytearray()
        self.lock = asyncio.Lock()

    async def _connect(self, password: str | None) -> None:
        host, _, port = self.address.decode().rpartition(":")
        self.reader, self.writer = await asyncio.open_connection(host.strip("[]"), int(port))
        hello: list[list[bytes]] = []
        if password:
            hello.append([b"AUTH", password.encode()])
        if self.resp == 3:
            hello.append([b"HELLO", b"3"])
        if self.front:
            hello.append([b"EMQ.FRONT", self.address])
        for argv in hello:
            reply = await self._exchange(argv)
            if reply.startswith(b"-"):
                raise ConnectionError(f"front {self.address!r} refused {argv[0]!r}: {reply!r}")

    async def request(self, argv: list[bytes], password: str | None) -> bytes:
        """The owner front's reply to `argv`, as the bytes it sent."""
        async with self.lock:
            if self.writer is None:
                await self._connect(password)
            try:
                return await self._exchange(argv)
            except BaseException:
                self.close()
                raise

    async def _exchange(self, argv: list[bytes]) -> bytes:
        assert self.writer is not None and self.reader is not None
        self.writer.write(encode_request(argv))
        while True:
            end = reply_end(self.buffer, 0)
            if end is not None:
                reply = bytes(self.buffer[:end])
                del self.buffer[:end]
                return reply
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError(f"front {self.address!r} closed the connection")
            self.buffer += data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
        self.buffer.clear()


class Owners(Protocol):
    """What the router asks of its front (front.py)."""

    address: bytes
    client: RedisCluster
    password: str | None
    resolve_s: float
    leases: Leases
    sink: ClusterSink

    def serves(self, queue: bytes) -> bool: ...

    async def adopt(self, queue: bytes, seen: bytes | None) -> bool: ...

    async def registered(self) -> Any: ...


class ClusterRouter:
    def __init__(self, front: Owners) -> None:
        self.front = front
        self.links: dict[int, dict[tuple[bytes, int], Link]] = {}  # session id -> its links

    # --- the dispatcher's question -------------------------------------------------
    def route(self, session: Session, row: Command, argv: list[bytes]) -> Any:
        """None: run it here. Else the answer: a refusal, or `Later`."""
        if row.name == "exec":
            return self._exec(session)
        queue = self.queue_of(row, argv)
        if queue is None:
            if row.name == "emq.queues":
                return Later(asyncio.ensure_future(self.front.registered()))
            return None
        if queue is OUTSIDE:
            return Later(asyncio.ensure_future(self._to_cluster(session, row, argv)))
        if isinstance(queue, errors.ReplyError):
            return queue
        if self.front.serves(queue):
            return None
        if session.forwarded:
            return NOT_HERE()
        return Later(asyncio.ensure_future(self._elsewhere(session, argv, queue)))

    def queue_of(self, row: Command, argv: list[bytes]) -> bytes | errors.ReplyError | None:
        """The one queue a request is about; None for none; OUTSIDE for keys of one slot
        outside the queues; a refusal for keys of several queues or slots."""
        if row.group == "emq":
            if row.name in NO_QUEUE or len(argv) < 2:
                return None
            return argv[1]
        keys = self._keys(row, argv)
        if not keys:
            return None
        queues = {queue_of(key) for key in keys}
        if None in queues:
            if len(queues) > 1 or len({key_slot(key) for key in keys}) > 1:
                return CROSSSLOT()
            return OUTSIDE
        if len(queues) > 1:
            return CROSSSLOT()
        return queues.pop()

    @staticmethod
    def _keys(row: Command, argv: list[bytes]) -> list[bytes]:
        counted = _COUNTED_KEYS.get(row.name)
        if counted is not None:
            count_at, first, before = counted
            try:
                count = int(argv[count_at])
            except (IndexError, ValueError):
                return argv[1:1 + before]  # the command refuses it itself
            return argv[1:1 + before] + argv[first:first + max(count, 0)]
        first, last, step = row.keys
        if not first:
            return []
        stop = len(argv) + last if last < 0 else last
        return argv[first:stop + 1:step]

    def _exec(self, session: Session) -> Any:
        """EXEC runs here when all it queued is one queue this front holds."""
        queues = set()
        for request in session.multi or ():
            row = lookup(request)
            if isinstance(row, Command):
                queue = self.queue_of(row, request)
                if isinstance(queue, errors.ReplyError):
                    return queue
                if queue is not None:
                    queues.add(queue)
        if len(queues) > 1:
            return CROSSSLOT()
        if queues and not self.front.serves(queues.pop()):
            return NOT_HERE()
        return None

    # --- elsewhere -------------------------------------------------------------------
    async def _elsewhere(self, session: Session, argv: list[bytes], queue: bytes) -> Any:
        """Take the queue and run here (AGAIN), or forward to its owner; bounded."""
        front = self.front
        deadline = time.monotonic() + front.resolve_s
        pause = RESOLVE_PAUSE_S
        while True:
            try:
                owner = await front.leases.owner(queue)
                if owner is None or address_of(owner) == front.address:
                    if await front.adopt(queue, owner):
                        return AGAIN
                else:
                    reply = await self._link(session, address_of(owner)).request(
                        argv, front.password)
                    if not reply.startswith(b"-TRYAGAIN"):
                        return Raw(reply)
            except (RedisError, OSError) as exc:
                log.debug("cluster: %r not reached yet: %s", queue, exc)
            if time.monotonic() >= deadline:
                return errors.UNACKNOWLEDGED()
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def _to_cluster(self, session: Session, row: Command, argv: list[bytes]) -> Any:
        """A request on keys outside the queues, to the primary of their slot; the slot's
        primary is the client library's to know (asked again after a MOVED or an error)."""
        front = self.front
        key = self._keys(row, argv)[0]
        deadline = time.monotonic() + front.resolve_s
        pause = RESOLVE_PAUSE_S
        while True:
            try:
                node = front.client.nodes_manager.get_node_from_slot(key_slot(key))
                address = f"{node.host}:{node.port}".encode()
                reply = await self._link(session, address, front=False).request(argv, None)
                if not reply.startswith((b"-MOVED", b"-ASK", b"-TRYAGAIN", b"-CLUSTERDOWN")):
                    return Raw(reply)
            except (RedisError, OSError) as exc:
                log.debug("cluster: %r not reached yet: %s", key, exc)
            if time.monotonic() >= deadline:
                return errors.UNACKNOWLEDGED()
            await asyncio.shield(front.sink.refresh_topology())
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _link(self, session: Session, address: bytes, front: bool = True) -> Link:
        links = self.links.setdefault(session.id, {})
        key = (address, session.resp)
        link = links.get(key)
        if link is None:
            link = links[key] = Link(address, session.resp, front)
        return link

    def forget(self, session: Session) -> None:
        """The client left: its links to other fronts close."""
        for link in self.links.pop(session.id, {}).values():
            link.close()
