"""Where a request runs in cluster mode: here, at the queue's owner front, or nowhere.

The dispatcher asks `route` before it runs a request (emqd/dispatch.py). A
request names its queue by its first argument (an EMQ verb) or by its keys'
hash tag (a plain command on `emq:{QUEUE}:...`); a request without keys
(PING, INFO, CLIENT, ...) runs here. Then:

- this front holds the queue's lease: it runs here (None), and its reply tells
  of the queue's writes so far (`Session.tells`: it leaves once the cluster
  holds them, and a retryable error goes in its place if they are lost);
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
stop until the reply comes (`AGAIN`: run it here now).

A request is sent on at most once. What was refused before it ran (the owner
front no longer owns the queue: NOT_HERE; a node's MOVED, ASK, TRYAGAIN or
CLUSTERDOWN) is looked up and sent again; what may have run (its answer was
lost with the connection, or did not come in time) is answered UNANSWERED,
never sent again, so that one request is never applied twice (a client that
wants an ADD retried exactly once sends its ID). Every wait is bounded:
`--cluster-timeout-ms` to find the owner while the cluster does not answer;
the lease's time more while the owner is dead (its lease must run out first);
and for a forwarded request, its own blocking time (`blocking_s`) plus the
lease plus the timeout, with the owner's lease looked at every third of the
lease once it ran past the timeout (a request held by an owner that stopped,
or was cut off, is given up as soon as another front may own the queue).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from redis.crc import key_slot

from emqd import errors
from emqd.cluster.names import NOT_OWNER, queue_of
from emqd.cluster.nodes import CONNECT_S, FAILED, Topology, address_text
from emqd.cluster.ownership import Leases, address_of
from emqd.cluster.sink import CROSSSLOT, ClusterSink
from emqd.command import Command
from emqd.config import Config
from emqd.dispatch import lookup
from emqd.plan import AGAIN, Later
from emqd.reply import Raw
from emqd.session import Session
from emqd.verbs import claim, wait
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
_NOT_HERE = b"-" + NOT_OWNER.message + b"\r\n"  # the owner front's: it did not run it
_NOT_RUN = (b"-MOVED", b"-ASK", b"-TRYAGAIN", b"-CLUSTERDOWN")  # a node's: it did not run it


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

    async def connect(self, password: str | None) -> None:
        """Connect (and introduce this link) unless connected; nothing of a client's is
        sent yet, so a failure here may be retried elsewhere."""
        if self.writer is not None:
            return
        host, _, port = self.address.decode().rpartition(":")
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port)), CONNECT_S)
            hello: list[list[bytes]] = []
            if password:
                hello.append([b"AUTH", password.encode()])
            if self.resp == 3:
                hello.append([b"HELLO", b"3"])
            if self.front:
                hello.append([b"EMQ.FRONT", self.address])
            for argv in hello:
                reply = await asyncio.wait_for(self.exchange(argv), CONNECT_S)
                if reply.startswith(b"-"):
                    raise ConnectionError(f"{self.address!r} refused {argv[0]!r}: {reply!r}")
        except BaseException:
            self.close()
            raise

    async def exchange(self, argv: list[bytes]) -> bytes:
        """Send `argv` and read its reply, as the bytes sent back."""
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
                raise ConnectionError(f"{self.address!r} closed the connection")
            self.buffer += data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
        self.buffer.clear()


class Owners(Protocol):
    """What the router asks of its front (front.py)."""

    address: bytes
    topology: Topology
    password: str | None
    lease_s: float
    timeout_s: float
    leases: Leases
    sink: ClusterSink
    config: Config

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
                return Later(asyncio.ensure_future(self._registered()))
            return None
        if queue is OUTSIDE:
            return Later(asyncio.ensure_future(self._to_cluster(session, row, argv)))
        if isinstance(queue, errors.ReplyError):
            return queue
        if self.front.serves(queue):
            session.tells = self.front.sink.last_of(queue)
            return None
        if session.forwarded:
            return NOT_OWNER()  # never forwarded on: the forwarding front looks again
        return Later(asyncio.ensure_future(self._elsewhere(session, row, argv, queue)))

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
        """EXEC runs here when all it queued is one queue this front holds (its reply
        tells of that queue's writes so far, as any request's here)."""
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
        if queues:
            queue = queues.pop()
            if not self.front.serves(queue):
                return NOT_OWNER()
            session.tells = self.front.sink.last_of(queue)
        return None

    # --- elsewhere -------------------------------------------------------------------
    async def _registered(self) -> Any:
        try:
            return await self.front.registered()
        except FAILED:
            return errors.UNREACHABLE()

    async def _elsewhere(self, session: Session, row: Command, argv: list[bytes],
                         queue: bytes) -> Any:
        """Take the queue and run here (AGAIN), or forward to its owner: sent at most once
        (see the module's docstring), every wait bounded."""
        front = self.front
        loop = asyncio.get_running_loop()
        started = loop.time()
        unreachable_at = started + front.timeout_s  # the cluster has not answered by then
        give_up_at = started + front.lease_s + front.timeout_s  # a dead owner's lease is gone
        pause = RESOLVE_PAUSE_S
        while True:
            try:
                owner = await front.leases.owner(queue, max(unreachable_at - loop.time(),
                                                            RESOLVE_PAUSE_S))
            except FAILED as exc:
                log.debug("cluster: the owner of %r not looked up: %s", queue, exc)
                if loop.time() >= unreachable_at:
                    return errors.UNREACHABLE()
            else:
                unreachable_at = loop.time() + front.timeout_s
                try:
                    if owner is None or address_of(owner) == front.address:
                        left = max(unreachable_at - loop.time(), RESOLVE_PAUSE_S)
                        if await asyncio.wait_for(front.adopt(queue, owner), left):
                            return AGAIN
                    else:
                        reply = await self._forward(session, row, argv, queue, owner)
                        if reply is not None:
                            return reply
                except FAILED as exc:
                    log.debug("cluster: %r not reached yet: %s", queue, exc)
            if loop.time() >= give_up_at:
                return errors.UNANSWERED()
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def _forward(self, session: Session, row: Command, argv: list[bytes], queue: bytes,
                       owner: bytes) -> Any:
        """The owner's reply; None when it refused before running (it does not own the
        queue: look again); UNANSWERED when the answer did not come (it may have run).
        Raises before anything was sent (a refused connection: look again)."""
        front = self.front
        link = self._link(session, address_of(owner))
        await link.connect(front.password)
        blocking = blocking_s(row, argv, front.config)
        bound = front.lease_s + front.timeout_s + (blocking or 0.0)
        try:
            reply = await self._watched(link.exchange(argv), queue, owner,
                                        None if blocking == 0.0 else bound)
        except (OSError, TimeoutError) as exc:
            link.close()
            log.debug("cluster: a request forwarded for %r went unanswered: %s", queue, exc)
            return errors.UNANSWERED()
        if reply == _NOT_HERE:
            return None
        return Raw(reply)

    async def _watched(self, sent: Coroutine[Any, Any, bytes], queue: bytes, owner: bytes,
                       bound: float | None) -> bytes:
        """`sent`'s reply within `bound` seconds (None: as long as the owner holds the
        queue). Once it has waited the write timeout, the owner's lease is looked at
        every third of the lease, and a lease that moved or ran out ends the wait
        (TimeoutError): a frozen or cut-off owner's answer may never come."""
        front = self.front
        task: asyncio.Task[bytes] = asyncio.ensure_future(sent)
        loop = asyncio.get_running_loop()
        deadline = None if bound is None else loop.time() + bound
        try:
            done, _ = await asyncio.wait({task}, timeout=front.timeout_s if bound is None
                                         else min(front.timeout_s, bound))
            while not done:
                if deadline is not None and loop.time() >= deadline:
                    raise TimeoutError("no answer within the forwarding bound")
                try:
                    now_owner = await front.leases.owner(queue, front.lease_s / 3)
                except FAILED:
                    now_owner = owner  # the cluster cannot tell: the bound decides
                if now_owner != owner:
                    raise TimeoutError(f"the lease on {queue!r} moved or ran out")
                pause = front.lease_s / 3
                if deadline is not None:
                    pause = min(pause, max(deadline - loop.time(), 0.0))
                done, _ = await asyncio.wait({task}, timeout=pause)
            return task.result()
        finally:
            task.cancel()

    async def _to_cluster(self, session: Session, row: Command, argv: list[bytes]) -> Any:
        """A request on keys outside the queues, to the primary of their slot (of the slot
        map of the moment, read again after a refusal or an error). Sent again only
        after an answer that says it did not run (MOVED, ASK, TRYAGAIN, CLUSTERDOWN)."""
        front = self.front
        key = self._keys(row, argv)[0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + front.timeout_s
        pause = RESOLVE_PAUSE_S
        while True:
            address = front.topology.primary(key_slot(key))
            if address is not None:
                link = self._link(session, address_text(address).encode(), front=False)
                try:
                    await link.connect(None)
                except FAILED as exc:
                    log.debug("cluster: %r not reached yet: %s", key, exc)
                else:
                    try:
                        reply = await asyncio.wait_for(link.exchange(argv),
                                                       max(deadline - loop.time(), 0.0))
                    except (OSError, TimeoutError):
                        link.close()
                        return errors.UNANSWERED()
                    if not reply.startswith(_NOT_RUN):
                        return Raw(reply)
            if loop.time() >= deadline:
                return errors.UNREACHABLE()
            await asyncio.shield(front.topology.refresh())
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


def blocking_s(row: Command, argv: list[bytes], config: Config) -> float | None:
    """How long a request may block at its owner, in seconds: None for one that does not
    block, 0.0 for one that may block for ever (the verb's or command's own parser reads
    it; a request it refuses is answered at once)."""
    if "blocking" not in row.flags:
        return None
    try:
        if row.name == "emq.claim":
            block = claim.parse(argv, config).block
            return None if block is None else block / 1000
        if row.name == "emq.wait":
            return wait.parse(argv, config).timeout_ms / 1000
        return float(argv[1] if row.name == "bzmpop" else argv[-1])
    except (errors.ReplyError, ValueError):
        return None
