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
from collections import deque
from typing import Any, Protocol

from redis.crc import key_slot

from emqd import errors
from emqd.cluster.fronts import Fronts
from emqd.cluster.names import NOT_OWNER, is_cluster_key, queue_of
from emqd.cluster.nodes import CONNECT_S, FAILED, Topology, address_text
from emqd.cluster.ownership import Leases, address_of
from emqd.cluster.sink import CROSSSLOT, ClusterSink
from emqd.command import Command
from emqd.commands.fronts import proof
from emqd.config import Config
from emqd.dispatch import lookup
from emqd.plan import AGAIN, Later
from emqd.reply import Raw
from emqd.session import Session
from emqd.verbs import claim, wait
from emqd.wire.resp import encode_request, reply_end

log = logging.getLogger("emqd")

RESOLVE_PAUSE_S = 0.05  # between two looks at a queue's owner, doubled up to a second
ABSENT_S = 1.0  # how long a queue found nowhere is read here without being taken
ABSENT_MAX = 10_000  # queues remembered as absent, at most (the oldest forgotten)
OWNER_TRUSTED_S = 1.0  # an owner found is sent requests at once this long (then looked up)
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
CLUSTER_KEY = errors.Refusal(
    "ERR emq:queues, emq:fronts, emq:dues and emq:owned:* are the fronts' own keys: not "
    "written by clients")


class Link:
    """One client's connection to another front (or to a node of the cluster), for the
    requests it sends there, pipelined: each is written when it is sent, so they go in
    the order sent, and one reader answers them in that order; `front` says which: a
    front is told it is forwarded to."""

    def __init__(self, address: bytes, resp: int, front: bool = True, user: bytes = b"") -> None:
        self.address = address
        self.resp = resp
        self.front = front
        self.user = user
        self.writer: asyncio.StreamWriter | None = None
        self.reading: asyncio.Task[None] | None = None
        self.waiting: deque[asyncio.Future[bytes]] = deque()  # sent, in order
        self.lock = asyncio.Lock()  # one connection attempt at a time

    @property
    def connected(self) -> bool:
        return self.writer is not None

    async def connect(self, password: str | None) -> None:
        """Connect (and introduce this link) unless connected; nothing of a client's is
        sent yet, so a failure here may be retried elsewhere. A front is shown the proof
        that this one knows the fronts' `password` (EMQ.FRONT's challenge), never the
        password; a node of the cluster is sent its own (`password` is the node's then,
        with its user)."""
        async with self.lock:
            if self.writer is not None:
                return
            host, _, port = self.address.decode().rpartition(":")
            try:
                reader, self.writer = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port)), CONNECT_S)
                self.reading = asyncio.get_running_loop().create_task(self._read(reader))
                if self.front and password:
                    nonce = _bulk_of(await self._introduce([b"EMQ.FRONT", b"CHALLENGE"]))
                    await self._introduce([b"EMQ.FRONT", self.address, b"PROOF",
                                           proof(password, nonce, self.address)])
                elif self.front:
                    await self._introduce([b"EMQ.FRONT", self.address])
                elif password:
                    await self._introduce([b"AUTH", *([self.user] if self.user else []),
                                           password.encode()])
                if self.resp == 3:
                    await self._introduce([b"HELLO", b"3"])
            except BaseException:
                self.close()
                raise

    async def _introduce(self, argv: list[bytes]) -> bytes:
        reply = await asyncio.wait_for(self.send(argv), CONNECT_S)
        if reply.startswith(b"-"):
            raise ConnectionError(f"{self.address!r} refused {argv[0]!r}: {reply!r}")
        return reply

    def send(self, argv: list[bytes]) -> asyncio.Future[bytes]:
        """Write `argv` now; the future of its reply, as the bytes sent back (a
        ConnectionError when the connection ends first)."""
        assert self.writer is not None
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.writer.write(encode_request(argv))
        return future

    async def _read(self, reader: asyncio.StreamReader) -> None:
        buffer = bytearray()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError(f"{self.address!r} closed the connection")
                buffer += data
                at = 0
                while (end := reply_end(buffer, at)) is not None:
                    reply = bytes(buffer[at:end])
                    at = end
                    if self.waiting:
                        future = self.waiting.popleft()
                        if not future.done():
                            future.set_result(reply)
                del buffer[:at]
        except (OSError, ValueError) as exc:
            self._fail_waiting(exc if isinstance(exc, OSError) else ConnectionError(str(exc)))

    def _fail_waiting(self, why: OSError) -> None:
        writer = self.writer
        self.writer = None
        if writer is not None:
            writer.close()
        waiting, self.waiting = self.waiting, deque()
        for future in waiting:
            if not future.done():
                future.set_exception(why)

    def close(self) -> None:
        if self.reading is not None:
            self.reading.cancel()
            self.reading = None
        self._fail_waiting(ConnectionError(f"the link to {self.address!r} was closed"))


def _bulk_of(reply: bytes) -> bytes:
    """The string of a bulk reply (`$5\r\nvalue\r\n`)."""
    return reply.split(b"\r\n", 2)[1]


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
    fronts: Fronts
    held: dict[bytes, Any]
    shed: dict[bytes, float]

    def serves(self, queue: bytes) -> bool: ...

    async def adopt(self, queue: bytes, seen: bytes | None) -> bool: ...

    async def registered(self) -> Any: ...

    async def exists(self, queue: bytes) -> bool: ...


class ClusterRouter:
    def __init__(self, front: Owners) -> None:
        self.front = front
        self.links: dict[int, dict[tuple[bytes, int], Link]] = {}  # session id -> its links
        # Queues found in no front's hands and not in the registry: a request that only
        # reads runs here on the empty store, not taking a lease (until the time noted).
        self.absent: dict[bytes, float] = {}
        # Each queue's owner as last found (its address, its lease's value, until when it
        # is trusted): a request to it is sent on at once, pipelined behind the others.
        self.owners: dict[bytes, tuple[bytes, bytes, float]] = {}

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
            if "write" in row.flags and any(map(is_cluster_key, self._keys(row, argv))):
                return CLUSTER_KEY()
            return Later(asyncio.ensure_future(self._to_cluster(session, row, argv)))
        if isinstance(queue, errors.ReplyError):
            return queue
        if self.front.serves(queue):
            session.tells = self.front.sink.last_of(queue)
            return None
        if row.name == "emq.owner":
            return Later(asyncio.ensure_future(self._owner_address(queue)))
        if "write" not in row.flags and self.absent.get(queue, 0.0) > time.monotonic():
            return None  # nobody has it: the empty store answers, and nothing is taken
        if session.forwarded:  # never forwarded on: taken here, or the forwarder looks again
            return Later(asyncio.ensure_future(self._forwarded_here(row, queue)))
        link = self._open_link(session, queue)
        if link is not None:
            address, owner, _ = self.owners[queue]
            sent = link.send(argv)
            return Later(asyncio.ensure_future(self._relay(
                session, row, argv, queue, address, owner, link, sent)), sent=True)
        return Later(asyncio.ensure_future(self._elsewhere(session, row, argv, queue)))

    def _open_link(self, session: Session, queue: bytes) -> Link | None:
        """The open link of this client to `queue`'s owner, when the owner is known and
        trusted still (None: look it up first)."""
        known = self.owners.get(queue)
        if known is None:
            return None
        if known[2] <= time.monotonic():
            del self.owners[queue]
            return None
        link = self.links.get(session.id, {}).get((known[0], session.resp))
        return link if link is not None and link.connected else None

    def forwards(self, session: Session, argv: list[bytes]) -> bool:
        """Whether `argv` would be sent on at once to its queue's known owner (no lookup,
        nothing run here): the connection then sends it behind the requests it sent on
        before, and a pipeline through this front stays a pipeline."""
        if not session.authenticated or session.multi is not None or session.forwarded \
                or session.pubsub is not None:
            return False
        row = lookup(argv)
        if not isinstance(row, Command) or row.name in ("exec", "emq.owner"):
            return False
        queue = self.queue_of(row, argv)
        if type(queue) is not bytes or queue in self.front.held:
            return False
        return self._open_link(session, queue) is not None

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

    async def _owner_address(self, queue: bytes) -> Any:
        """EMQ.OWNER of a queue this front does not hold: its owner's address, or where it
        belongs among the live fronts when nobody owns it. Nothing is taken."""
        try:
            owner = await self.front.leases.owner(queue)
        except FAILED:
            return errors.UNREACHABLE()
        return address_of(owner) if owner is not None else self.front.fronts.place(queue)

    async def _unowned(self, row: Command, queue: bytes, owner: bytes | None) -> Any:
        """Nobody owns `queue` (or an earlier life of this front, `owner`): take it and
        run the request here (AGAIN), or, for a request that only reads a queue the
        registry does not know, run it here without taking anything (AGAIN too)."""
        front = self.front
        if owner is None and "write" not in row.flags and not await front.exists(queue):
            self.absent[queue] = time.monotonic() + ABSENT_S
            if len(self.absent) > ABSENT_MAX:
                self.absent = {q: at for q, at in self.absent.items() if at > time.monotonic()}
            return AGAIN
        self.absent.pop(queue, None)
        return AGAIN if await front.adopt(queue, owner) else None

    async def _forwarded_here(self, row: Command, queue: bytes) -> Any:
        """A request another front forwarded for a queue this front does not hold: taken
        here if nobody owns it (and this front did not just hand it over), else NOT_OWNER
        (it ran nothing: the forwarder looks again)."""
        try:
            owner = await self.front.leases.owner(queue)
            # A forwarder with an older view of the fronts may send a queue here that
            # this front just handed over as beyond its share: it looks again instead.
            mine = owner is not None or self.front.shed.get(queue, 0.0) < time.monotonic()
            if mine and (owner is None or address_of(owner) == self.front.address):
                if await asyncio.wait_for(self._unowned(row, queue, owner),
                                          self.front.timeout_s) is AGAIN:
                    return AGAIN
        except FAILED as exc:
            log.debug("cluster: %r not taken for a forwarded request: %s", queue, exc)
        return NOT_OWNER()

    async def _relay(self, session: Session, row: Command, argv: list[bytes], queue: bytes,
                     address: bytes, owner: bytes, link: Link, sent: asyncio.Future[bytes],
                     ) -> Any:
        """The reply to a request sent on at once to its queue's known owner; where that
        front no longer owns it (NOT_OWNER: nothing ran), looked up and sent again, but
        never run here (a request sent on at once may have others behind it, whose
        replies must follow its own: such a client is told to retry instead)."""
        front = self.front
        blocking = blocking_s(row, argv, front.config)
        bound = front.lease_s + front.timeout_s + (blocking or 0.0)
        try:
            reply = await self._watched(sent, queue, address, owner,
                                        None if blocking == 0.0 else bound)
        except (OSError, TimeoutError) as exc:
            link.close()
            self.owners.pop(queue, None)
            log.debug("cluster: a request sent on for %r went unanswered: %s", queue, exc)
            return errors.UNANSWERED()
        if reply == _NOT_HERE:
            self.owners.pop(queue, None)
            return await self._elsewhere(session, row, argv, queue, here=False)
        self.owners[queue] = (address, owner, time.monotonic() + OWNER_TRUSTED_S)
        return Raw(reply)

    async def _elsewhere(self, session: Session, row: Command, argv: list[bytes],
                         queue: bytes, here: bool = True) -> Any:
        """Take the queue and run here (AGAIN), or forward to its owner (or, when nobody
        owns it, to the live front it belongs to, which takes it): sent at most once (see
        the module's docstring), every wait bounded. Not `here`: where the request would
        run here, NOT_OWNER (the client retries) instead."""
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
                address = address_of(owner) if owner is not None else \
                    front.fronts.place(queue)
                try:
                    if not await front.fronts.is_front(address):
                        # An owner key naming no front of the registry (written straight
                        # into the cluster): nothing is sent there (not the request, not
                        # the proof of being a front), and its lease must run out first.
                        log.warning("cluster: %r is held by %s, which is no front of the "
                                    "cluster; waiting for its lease", queue,
                                    address.decode("latin-1"))
                    elif address == front.address:
                        if not here:
                            return NOT_OWNER()
                        left = max(unreachable_at - loop.time(), RESOLVE_PAUSE_S)
                        if await asyncio.wait_for(self._unowned(row, queue, owner), left):
                            return AGAIN
                    else:
                        if owner is None:
                            front.fronts.placed_at(address)  # it takes the queue: its share
                        reply = await self._forward(session, row, argv, queue, address, owner)
                        if reply is not None:
                            return reply
                except FAILED as exc:
                    log.debug("cluster: %r not reached yet: %s", queue, exc)
                    if owner is None and here:  # the front it belongs to does not answer
                        left = max(unreachable_at - loop.time(), RESOLVE_PAUSE_S)
                        if await asyncio.wait_for(self._unowned(row, queue, None), left):
                            return AGAIN
            if loop.time() >= give_up_at:
                return errors.UNANSWERED()
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def _forward(self, session: Session, row: Command, argv: list[bytes], queue: bytes,
                       address: bytes, owner: bytes | None) -> Any:
        """The reply of the front at `address` (the owner, whose lease is `owner`, or the
        front an unowned queue belongs to); None when it refused before running (it does
        not own the queue: look again); UNANSWERED when the answer did not come (it may
        have run). Raises before anything was sent (a refused connection)."""
        front = self.front
        link = self._link(session, address)
        await link.connect(front.password)
        blocking = blocking_s(row, argv, front.config)
        bound = front.lease_s + front.timeout_s + (blocking or 0.0)
        try:
            reply = await self._watched(link.send(argv), queue, address, owner,
                                        None if blocking == 0.0 else bound)
        except (OSError, TimeoutError) as exc:
            link.close()
            log.debug("cluster: a request forwarded for %r went unanswered: %s", queue, exc)
            return errors.UNANSWERED()
        if reply == _NOT_HERE:
            self.owners.pop(queue, None)
            return None
        if owner is not None:
            self.owners[queue] = (address, owner, time.monotonic() + OWNER_TRUSTED_S)
        return Raw(reply)

    async def _watched(self, sent: asyncio.Future[bytes], queue: bytes, address: bytes,
                       owner: bytes | None, bound: float | None) -> bytes:
        """`sent`'s reply within `bound` seconds (None: as long as the front at `address`
        holds the queue). Once it has waited the write timeout, the queue's lease is
        looked at every third of the lease, and a lease that moved or ran out ends the
        wait (TimeoutError): a frozen or cut-off owner's answer may never come. (Sent to
        the front an unowned queue belongs to, `owner` None, the wait goes on while that
        front takes it, or nobody has.)"""
        front = self.front
        task = sent
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
                if now_owner != owner and not (owner is None and (
                        now_owner is None or address_of(now_owner) == address)):
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
                    await link.connect(front.config.cluster_password)
                except FAILED as exc:
                    log.debug("cluster: %r not reached yet: %s", key, exc)
                else:
                    try:
                        reply = await asyncio.wait_for(link.send(argv),
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
            user = (self.front.config.cluster_user or "").encode()
            link = links[key] = Link(address, session.resp, front, b"" if front else user)
        return link

    def forget(self, session: Session) -> None:
        """The client left: its links to other fronts close (and the owners known, which
        only open links use, are trimmed once they are many)."""
        if len(self.owners) > ABSENT_MAX:
            now = time.monotonic()
            self.owners = {q: known for q, known in self.owners.items() if known[2] > now}
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
