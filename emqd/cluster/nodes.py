"""The front's own client of the cluster: which node serves each slot, and one pipelined
connection to each node, every request with a deadline.

A front must answer within bounds whatever the network does (docs/CLUSTER.md,
"What each fault costs"), so nothing here waits without one:

- `Pipe`: one TCP connection to one node. Requests are written back to back and
  their answers read in order (hiredis); each request has a deadline, and one
  that passes it closes the connection and fails what was on it (a node that
  stopped answering without closing its connections, SIGSTOP or a host cut off,
  is given up on, not waited for). A request that failed after its bytes may
  have left is never sent again here: the caller decides.
- `Topology`: the slot map, read with `CLUSTER NODES` from every known node at
  once, each given ASK_S to answer, on a schedule (`Front`: every second) and
  after every error. Where the answers disagree about a slot (a failover that not
  every node has heard of yet), the primary with the highest config epoch wins,
  which is how the nodes themselves settle it. A shard's replicas are those that
  some answer shows not failed: a replica is counted unless every node that
  mentions it marks it `fail` (counting one that is gone costs a refused WAIT;
  not counting one that is there would acknowledge writes no replica holds).

redis-py's cluster client did this before, and two faults came of its design:
its topology re-read asks the nodes in turn and waited for one that stopped
answering (holding every other queue's renewals), and the replicas of a shard
were read from its slot cache, which is refreshed only after an error, so a map
read while a replica was missing kept that shard at "no replica" for good.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import hiredis

from emqd.wire.resp import encode_request

log: Final = logging.getLogger("emqd")

SLOTS: Final = 16384
ASK_S: Final = 1.0  # how long each node has to answer a topology read
CONNECT_S: Final = 2.0  # a connection not made in this long fails

Address = tuple[str, int]
Done = Callable[[Any], None]  # a list of replies, or the exception that ended them


class NodeError(Exception):
    """An error reply of a node (`-MOVED 1234 10.0.0.2:7000`, `-EMQFENCED ...`)."""

    @property
    def text(self) -> str:
        return str(self.args[0]) if self.args else ""


FAILED: Final = (NodeError, OSError, TimeoutError)  # what a request to the cluster may end in


def parse_address(text: str) -> Address:
    """`HOST:PORT` (an IPv6 host in brackets or bare) as an address."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def address_text(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Request:
    __slots__ = ("count", "replies", "done", "timer")

    def __init__(self, count: int, done: Done) -> None:
        self.count = count
        self.replies: list[Any] = []
        self.done = done
        self.timer: asyncio.TimerHandle | None = None


class Pipe:
    """One connection to one node; requests pipelined, answers in order, each with a
    deadline. Connects when first used and again after a failure."""

    def __init__(self, address: Address, connect_s: float = CONNECT_S,
                 auth: Sequence[bytes] = ()) -> None:
        self.address = address
        self.connect_s = connect_s
        self.auth = auth  # AUTH's arguments, sent first on every connection (none: no AUTH)
        self.writer: asyncio.StreamWriter | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.unsent: list[bytes] = []  # written once connected
        self.waiting: deque[_Request] = deque()  # sent or to be sent, answers not all read

    @property
    def name(self) -> str:
        return address_text(self.address)

    def send(self, payload: bytes, count: int, timeout: float, done: Done) -> None:
        """Write `payload` (`count` commands, as RESP); `done` gets their `count` replies
        (error replies as NodeError values), or the exception that ended the connection
        first, or a TimeoutError after `timeout` seconds (the connection is then closed,
        failing everything else on it too)."""
        request = _Request(count, done)
        request.timer = asyncio.get_running_loop().call_later(timeout, self._expire, request)
        self.waiting.append(request)
        if self.writer is not None:
            self.writer.write(payload)
            return
        self.unsent.append(payload)
        if self.connecting is None:
            self.connecting = asyncio.get_running_loop().create_task(self._connect())

    def exchange(self, commands: Sequence[bytes], timeout: float) -> asyncio.Future[Any]:
        """`send` as a future: the replies to `commands` (each encoded apart)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any) -> None:
            if future.done():
                return
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

        self.send(b"".join(commands), len(commands), timeout, done)
        return future

    async def call(self, argv: Sequence[bytes | str | int], timeout: float) -> Any:
        """One command's reply; an error reply is raised (NodeError)."""
        reply = (await self.exchange([encode_request([_arg(a) for a in argv])], timeout))[0]
        if isinstance(reply, NodeError):
            raise reply
        return reply

    def _expire(self, request: _Request) -> None:
        if request in self.waiting:
            self.close(TimeoutError(f"{self.name} did not answer in time"))

    async def _connect(self) -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*self.address), self.connect_s)
        except (OSError, TimeoutError) as exc:
            self.connecting = None
            self.close(exc if isinstance(exc, OSError)
                       else ConnectionError(f"{self.name}: not connected in {self.connect_s:g}s"))
            return
        self.connecting = None
        self.writer = writer
        if self.auth:
            request = _Request(1, self._authenticated)
            self.waiting.appendleft(request)
            writer.write(encode_request([b"AUTH", *self.auth]))
        writer.write(b"".join(self.unsent))
        self.unsent = []
        asyncio.get_running_loop().create_task(self._read(reader, writer))

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader(replyError=NodeError)
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    raise ConnectionError(f"{self.name} closed the connection")
                parser.feed(data)
                while (reply := parser.gets()) is not False:
                    self._answer(reply)
        except (OSError, hiredis.ProtocolError) as exc:
            if self.writer is writer:
                self.close(exc)
            writer.close()

    def _authenticated(self, replies: Any) -> None:
        if not isinstance(replies, BaseException) and isinstance(replies[0], NodeError):
            self.close(ConnectionError(f"{self.name} refused this front's AUTH: "
                                       f"{replies[0].text}"))

    def _answer(self, reply: Any) -> None:
        if not self.waiting:
            return  # an answer to a request failed meanwhile (a closed connection's last)
        request = self.waiting[0]
        request.replies.append(reply)
        if len(request.replies) < request.count:
            return
        self.waiting.popleft()
        if request.timer is not None:
            request.timer.cancel()
        request.done(request.replies)

    def close(self, why: BaseException) -> None:
        """Let the connection go; every request on it fails with `why`."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()
        if self.connecting is not None:
            self.connecting.cancel()
            self.connecting = None
        self.unsent = []
        waiting, self.waiting = self.waiting, deque()
        for request in waiting:
            if request.timer is not None:
                request.timer.cancel()
            request.done(why)


def _arg(value: bytes | str | int) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()


class Shard:
    """The primary serving some slots, and its replicas that are not known to be down."""

    __slots__ = ("primary", "replicas")

    def __init__(self, primary: Address, replicas: tuple[Address, ...]) -> None:
        self.primary = primary
        self.replicas = replicas

    def __repr__(self) -> str:
        return f"Shard({self.primary!r}, {self.replicas!r})"


class _Node:
    """One line of CLUSTER NODES."""

    __slots__ = ("id", "address", "flags", "master", "epoch", "ranges")

    def __init__(self, line: str) -> None:
        fields = line.split()
        self.id = fields[0]
        host_port = fields[1].split("@")[0].split(",")[0]
        host, _, port = host_port.rpartition(":")
        self.address: Address | None = (host.strip("[]"), int(port)) if host and port != "0" \
            else None
        self.flags = set(fields[2].split(","))
        self.master = fields[3]
        self.epoch = int(fields[6])
        self.ranges: list[tuple[int, int]] = []
        for spec in fields[8:]:
            if spec.startswith("["):
                continue  # a slot being imported or migrated: its owner is listed as usual
            first, _, last = spec.partition("-")
            self.ranges.append((int(first), int(last or first)))


def merge(answers: Iterable[str]) -> tuple[list[Shard | None], set[Address]]:
    """The slot map and the nodes named, from CLUSTER NODES answers of several nodes
    (see the module's docstring for the rules)."""
    claims: list[tuple[int, int, int, str, Address]] = []  # (epoch, first, last, id, address)
    replicas: dict[str, dict[Address, bool]] = {}  # master id -> replica -> seen not failed
    named: set[Address] = set()
    for answer in answers:
        for line in answer.splitlines():
            if not line.strip():
                continue
            node = _Node(line)
            if node.address is None or "handshake" in node.flags or "noaddr" in node.flags:
                continue
            named.add(node.address)
            failed = "fail" in node.flags
            if "master" in node.flags and not failed:
                claims += [(node.epoch, first, last, node.id, node.address)
                           for first, last in node.ranges]
            elif "slave" in node.flags and node.master != "-":
                seen = replicas.setdefault(node.master, {})
                seen[node.address] = seen.get(node.address, False) or not failed
    shards: list[Shard | None] = [None] * SLOTS
    made: dict[str, Shard] = {}
    for _epoch, first, last, node_id, address in sorted(claims):  # the newest epoch last
        shard = made.get(node_id)
        if shard is None:
            alive = tuple(sorted(a for a, up in replicas.get(node_id, {}).items() if up))
            shard = made[node_id] = Shard(address, alive)
        shards[first:last + 1] = [shard] * (last + 1 - first)
    return shards, named


class Topology:
    """The slot map of the moment and a `Pipe` to each node, for the front's own reads and
    writes of the cluster (the sink's batches go on links of their own: sink.py)."""

    def __init__(self, seeds: list[Address], timeout_s: float,
                 auth: Sequence[bytes] = ()) -> None:
        self.seeds = list(seeds)
        self.timeout_s = timeout_s
        self.auth = auth  # AUTH's arguments for every node (the front's user and password)
        self.known: set[Address] = set(seeds)
        self.shards: list[Shard | None] = [None] * SLOTS
        self.pipes: dict[Address, Pipe] = {}
        self._reading: asyncio.Task[bool] | None = None
        self.reads = 0  # topology reads that found a map (INFO)

    # --- the map ---------------------------------------------------------------------
    def shard(self, slot: int) -> Shard | None:
        return self.shards[slot]

    def primary(self, slot: int) -> Address | None:
        shard = self.shards[slot]
        return None if shard is None else shard.primary

    def refresh(self) -> asyncio.Task[bool]:
        """Read the map again: one read at a time, shared by whoever asks meanwhile; True
        when some node answered (it is bounded by ASK_S and never raises)."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read())
        return self._reading

    async def _read(self) -> bool:
        asked = list(self.known)
        random.shuffle(asked)
        results = await asyncio.gather(*(self._ask(address) for address in asked),
                                       return_exceptions=True)
        answers = [result for result in results if isinstance(result, str)]
        if not answers:
            log.warning("cluster: no node answered CLUSTER NODES (%s)",
                        "; ".join(sorted({str(r) or type(r).__name__ for r in results})))
            return False
        shards, named = merge(answers)
        if all(shard is None for shard in shards):
            return False  # nodes that know no slots yet (a cluster being created)
        self.shards = shards
        self.known = named | set(self.seeds)
        for address in [a for a in self.pipes if a not in self.known]:
            self.pipes.pop(address).close(ConnectionError(f"{address_text(address)} left"))
        self.reads += 1
        return True

    async def _ask(self, address: Address) -> str:
        ask_s = min(ASK_S, self.timeout_s)
        reply = await asyncio.wait_for(self.pipe(address).call((b"CLUSTER", b"NODES"), ask_s),
                                       ask_s)
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    # --- requests --------------------------------------------------------------------
    def pipe(self, address: Address) -> Pipe:
        """The front's shared connection to the node at `address`."""
        pipe = self.pipes.get(address)
        if pipe is None:
            pipe = self.pipes[address] = self.connection(address)
        return pipe

    def connection(self, address: Address) -> Pipe:
        """A connection of its own to the node at `address` (the sink's, a load's)."""
        return Pipe(address, min(CONNECT_S, self.timeout_s), self.auth)

    async def call(self, slot: int, argv: Sequence[bytes | str | int],
                   timeout: float | None = None) -> Any:
        """One command to the slot's primary, within `timeout` (the write timeout by
        default). A MOVED answer (the slot moved: not applied) has the map read again and
        the command sent once more; any other failure is raised, and has the map read
        again in the background when it may mean a moved or silent primary."""
        deadline = asyncio.get_running_loop().time() + (timeout or self.timeout_s)
        for attempt in range(2):
            address = self.primary(slot)
            if address is None:
                await self._reread_until(deadline)
                address = self.primary(slot)
                if address is None:
                    raise ConnectionError(f"no node serves slot {slot}")
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"slot {slot}: no answer in time")
            try:
                return await self.pipe(address).call(argv, left)
            except NodeError as exc:
                if not exc.text.startswith("MOVED") or attempt:
                    raise
                await self._reread_until(deadline)
            except (OSError, TimeoutError):
                self.refresh()
                raise
        raise AssertionError("unreachable")

    def by_primary(self, slots: Sequence[int]) -> dict[Address | None, list[int]]:
        """The indexes of `slots`, grouped by the primary that serves each now (None: no
        node serves it)."""
        by_node: dict[Address | None, list[int]] = {}
        for i, slot in enumerate(slots):
            by_node.setdefault(self.primary(slot), []).append(i)
        return by_node

    async def scatter(self, requests: Sequence[tuple[int, bytes]], timeout: float) -> list[Any]:
        """Each request (its slot, one command as RESP) to its slot's primary, a primary's
        in one pipeline on its connection, each primary's apart (a primary that stops
        answering holds up only its own, `timeout` at most). For each request, in order:
        its reply (an error reply as a NodeError value), or the exception that kept it
        from being answered. Any failure has the map read again (a moved or silent
        primary)."""
        by_node = self.by_primary([slot for slot, _ in requests])
        results: list[Any] = [None] * len(requests)

        async def one_node(address: Address | None, indexes: list[int]) -> None:
            replies: list[Any]
            if address is None:
                replies = [ConnectionError("no node serves the slot")] * len(indexes)
            else:
                try:
                    replies = await self.pipe(address).exchange(
                        [requests[i][1] for i in indexes], timeout)
                except (OSError, TimeoutError) as exc:
                    replies = [exc] * len(indexes)
            for i, reply in zip(indexes, replies, strict=True):
                results[i] = reply

        await asyncio.gather(*(one_node(address, indexes)
                               for address, indexes in by_node.items()))
        if any(isinstance(result, BaseException) for result in results):
            self.refresh()
        return results

    async def _reread_until(self, deadline: float) -> None:
        left = deadline - asyncio.get_running_loop().time()
        if left > 0:
            try:
                await asyncio.wait_for(asyncio.shield(self.refresh()), left)
            except TimeoutError:
                pass

    def close(self) -> None:
        for pipe in self.pipes.values():
            pipe.close(ConnectionError("the front is shutting down"))
        self.pipes.clear()
        if self._reading is not None:
            self._reading.cancel()
