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

The three middle cases answer `Later` (emqd/commit/plan.py): the client's requests
stop until the reply comes (`AGAIN`: run it here now).

A request is sent on at most once. What was refused before it ran (the owner
front no longer owns the queue: NOT_HERE; a node's MOVED, ASK, TRYAGAIN or
CLUSTERDOWN) is looked up and sent again; what may have run (its answer was
lost with the connection, or did not come in time) is answered UNANSWERED,
never sent again, so that one request is never applied twice (a client that
wants an ADD retried exactly once sends its ID). Every wait is bounded:
`--cluster-timeout-ms` to find the owner while the cluster does not answer;
a take here, by its steps (each bounded by the timeout, the lease renewed
while the queue loads, however many jobs it holds);
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
from typing import Any, Protocol

from redis.crc import key_slot

from emqd import errors
from emqd.cluster.fronts import Fronts
from emqd.cluster.link import Link, Sent
from emqd.cluster.names import NOT_OWNER, is_cluster_key, queue_of
from emqd.cluster.nodes import FAILED, Topology, address_text
from emqd.cluster.ownership import Leases, address_of
from emqd.cluster.sink import CROSSSLOT, ClusterSink
from emqd.command import Command
from emqd.commit.plan import AGAIN, Later
from emqd.config import Config
from emqd.core import Session
from emqd.dispatch import lookup
from emqd.reply import Raw
from emqd.verbs import claim, wait

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


class Relayed(Sent):
    """A request sent on at once to its queue's known owner (no task of its own: the
    link answers it). Its reply comes back as it is; where that front no longer owns
    the queue (NOT_HERE: nothing ran), it is looked up and sent again, but never run
    here (a request sent on at once may have others behind it, whose replies must
    follow its own: such a client is told to retry instead); where the answer did not
    come, UNANSWERED."""

    __slots__ = ("router", "session", "row", "argv", "address")

    def __init__(self, router: ClusterRouter, session: Session, row: Command,
                 argv: list[bytes], queue: bytes, address: bytes, owner: bytes,
                 link: Link) -> None:
        super().__init__(link.loop.create_future(), queue, owner,
                         router.deadline(row, argv, link.loop))
        self.router = router
        self.session = session
        self.row = row
        self.argv = argv
        self.address = address

    def answer(self, reply: bytes) -> None:
        router, queue = self.router, self.queue
        assert queue is not None and self.owner is not None
        if reply == _NOT_HERE:
            router.owners.pop(queue, None)
            again = asyncio.ensure_future(router.elsewhere(
                self.session, self.row, self.argv, queue, here=False))
            again.add_done_callback(self._settle)
            return
        router.owners[queue] = (self.address, self.owner, time.monotonic() + OWNER_TRUSTED_S)
        if not self.future.done():
            self.future.set_result(Raw(reply))

    def _settle(self, again: asyncio.Future[Any]) -> None:
        if self.future.done():
            return
        if again.cancelled() or again.exception() is not None:
            self.future.set_result(errors.UNANSWERED())
        else:
            self.future.set_result(again.result())

    def fail(self, why: OSError) -> None:
        log.debug("cluster: a request sent on for %r went unanswered: %s", self.queue, why)
        assert self.queue is not None
        self.router.owners.pop(self.queue, None)
        if not self.future.done():
            self.future.set_result(errors.UNANSWERED())


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
            relayed = Relayed(self, session, row, argv, queue, address, owner, link)
            link.send(argv, relayed)
            return Later(relayed.future, sent=True)
        return Later(asyncio.ensure_future(self.elsewhere(session, row, argv, queue)))

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
            if mine and (owner is None or address_of(owner) == self.front.address) and \
                    await self._taken_here(row, queue, owner):
                return AGAIN
        except FAILED as exc:
            log.debug("cluster: the owner of %r not looked up for a forwarded request: %s",
                      queue, exc)
        return NOT_OWNER()

    async def _taken_here(self, row: Command, queue: bytes, owner: bytes | None) -> bool:
        """Whether the request runs here, `queue` taken (or, a read of a queue the registry
        does not know, needing no taking); False when the cluster did not answer in time or
        another front took it first. It waits for the take however long the queue takes
        to load: each step of a take is bounded by `--cluster-timeout-ms` and the lease is
        renewed while it loads, so a big queue (a million jobs load for seconds) is served
        once loaded instead of answered TRYAGAIN at the timeout."""
        try:
            return await self._unowned(row, queue, owner) is AGAIN
        except FAILED as exc:
            log.debug("cluster: %r not taken here: %s", queue, exc)
            return False

    async def elsewhere(self, session: Session, row: Command, argv: list[bytes],
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
                        if await self._taken_here(row, queue, owner):
                            return AGAIN
                    else:
                        if owner is None:
                            front.fronts.placed_at(address)  # it takes the queue: its share
                        reply = await self._forward(session, row, argv, queue, address, owner)
                        if reply is not None:
                            return reply
                except FAILED as exc:
                    log.debug("cluster: %r not reached yet: %s", queue, exc)
                    if owner is None and here and \
                            await self._taken_here(row, queue, None):  # that front is gone
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
        have run: the link's watch, emqd/cluster/link.py). Raises before anything was sent
        (a refused connection)."""
        link = self._link(session, address)
        await link.connect(self.front.password)
        future: asyncio.Future[bytes] = link.loop.create_future()
        link.send(argv, Sent(future, queue, owner, self.deadline(row, argv, link.loop)))
        try:
            reply = await future
        except OSError as exc:
            log.debug("cluster: a request forwarded for %r went unanswered: %s", queue, exc)
            return errors.UNANSWERED()
        if reply == _NOT_HERE:
            self.owners.pop(queue, None)
            return None
        if owner is not None:
            self.owners[queue] = (address, owner, time.monotonic() + OWNER_TRUSTED_S)
        return Raw(reply)

    # --- the links' watch (emqd/cluster/link.py) ---------------------------------------
    @property
    def timeout_s(self) -> float:
        return self.front.timeout_s

    @property
    def poll_s(self) -> float:
        return self.front.lease_s / 3

    async def moved(self, sent: Sent, address: bytes) -> bool:
        """Whether `sent.queue`'s lease is no longer the one it was sent under (sent to
        the front an unowned queue belongs to, `owner` None: whether another front than
        that one took it)."""
        assert sent.queue is not None
        try:
            now_owner = await self.front.leases.owner(sent.queue, self.poll_s)
        except FAILED:
            return False  # the cluster cannot tell: the deadline decides
        if sent.owner is None:
            return now_owner is not None and address_of(now_owner) != address
        return now_owner != sent.owner

    def deadline(self, row: Command, argv: list[bytes], loop: asyncio.AbstractEventLoop,
                 ) -> float | None:
        """The latest loop time a request sent on now may be answered: its own blocking
        time plus the lease plus the timeout (None: it may block for ever, and waits while
        its owner holds the queue)."""
        blocking = blocking_s(row, argv, self.front.config)
        if blocking == 0.0:
            return None
        return loop.time() + self.front.lease_s + self.front.timeout_s + (blocking or 0.0)

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
                        reply = await asyncio.wait_for(link.request(argv),
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
            link = links[key] = Link(address, session.resp, front, b"" if front else user,
                                     self if front else None, session.name or b"")
        return link

    def peers(self) -> list[bytes]:
        """EMQ.FRONTS: this front's address, then the other live fronts'."""
        here = self.front.address
        return [here, *sorted(address for address in self.front.fronts.live if address != here)]

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
