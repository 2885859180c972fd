"""A client's link to another front (emqd/cluster/link.py): requests pipelined in the
order sent, each turn's in one write; the oldest unanswered one watched, so that a
link whose owner stopped answering ends within its bounds, failing every request on it.

The other front here is a small server on 127.0.0.1 that records what it reads and
answers only when told to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import hiredis
import pytest

from emqd.cluster.link import Link, Sent
from emqd.wire.resp import encode_request

WAIT_S = 5.0  # every wait of these tests is bounded by this


class Peer:
    """A front that reads requests and answers `+OK` to as many as it is told."""

    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.writer: asyncio.StreamWriter | None = None
        self.connected = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.links: list[Link] = []  # the test's links to it, closed with it

    async def start(self) -> bytes:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}".encode()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.connected.set()
        while data := await reader.read(65536):
            self.reads.append(data)

    def answer(self, count: int) -> None:
        assert self.writer is not None
        self.writer.write(b"+OK\r\n" * count)

    def stop(self) -> None:
        for link in self.links:
            link.close()
        if self.writer is not None:
            self.writer.close()
        if self.server is not None:
            self.server.close()


class Lease:
    """The router's side of the watch: whether the lease moved, and how often asked."""

    def __init__(self, moved: bool) -> None:
        self.is_moved = moved
        self.asked: list[bytes | None] = []

    @property
    def timeout_s(self) -> float:
        return 0.05

    @property
    def poll_s(self) -> float:
        return 0.05

    async def moved(self, sent: Sent, address: bytes) -> bool:
        self.asked.append(sent.queue)
        return self.is_moved


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    front = Peer()
    yield front
    front.stop()


async def linked(peer: Peer, watch: Lease | None = None) -> Link:
    link = Link(await peer.start(), 2, front=False, watch=watch)
    peer.links.append(link)
    await link.connect(None)
    await asyncio.wait_for(peer.connected.wait(), WAIT_S)
    return link


def sent(link: Link, queue: bytes | None = b"q", deadline: float | None = None) -> Sent:
    request = Sent(link.loop.create_future(), queue, b"lease", deadline)
    link.send([b"EMQ.ADD", queue or b"-", b"x"], request)
    return request


async def test_requests_sent_in_one_turn_go_in_one_write_and_are_answered_in_order(
        peer: Peer) -> None:
    link = await linked(peer)
    requests = [sent(link) for _ in range(50)]
    await asyncio.sleep(0.1)
    assert peer.reads == [encode_request([b"EMQ.ADD", b"q", b"x"]) * 50]
    assert not any(request.future.done() for request in requests)
    peer.answer(20)
    await asyncio.wait_for(requests[19].future, WAIT_S)
    assert [r.future.done() for r in requests] == [True] * 20 + [False] * 30
    assert requests[0].future.result() == b"+OK\r\n"
    link.close()
    assert all(isinstance(r.future.exception(), ConnectionError) for r in requests[20:])


async def test_a_request_past_the_timeout_whose_lease_moved_ends_the_link(peer: Peer) -> None:
    lease = Lease(moved=True)
    link = await linked(peer, lease)
    first, second = sent(link, b"a"), sent(link, b"b")
    with pytest.raises(TimeoutError, match="moved"):
        await asyncio.wait_for(first.future, WAIT_S)
    assert isinstance(second.future.exception(), TimeoutError)
    assert lease.asked == [b"a"]  # only the head is looked at
    assert not link.connected


async def test_a_request_whose_lease_holds_waits_until_its_deadline(peer: Peer) -> None:
    lease = Lease(moved=False)
    link = await linked(peer, lease)
    request = sent(link, deadline=link.loop.time() + 0.4)
    started = link.loop.time()
    with pytest.raises(TimeoutError, match="bound"):
        await asyncio.wait_for(request.future, WAIT_S)
    assert link.loop.time() - started >= 0.35
    assert len(lease.asked) >= 3  # looked at every poll, not given up while it held


async def test_an_answered_head_hands_the_watch_to_the_next_request(peer: Peer) -> None:
    lease = Lease(moved=False)
    link = await linked(peer, lease)
    first = sent(link, b"a")
    await asyncio.sleep(0.02)
    second = sent(link, b"b")
    peer.answer(1)
    assert await asyncio.wait_for(first.future, WAIT_S) == b"+OK\r\n"
    await asyncio.sleep(0.3)
    assert b"b" in lease.asked and not second.future.done()  # watched, not ended
    lease.is_moved = True
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(second.future, WAIT_S)


async def test_a_request_never_waited_on_past_the_timeout_is_never_looked_at(
        peer: Peer) -> None:
    lease = Lease(moved=True)
    link = await linked(peer, lease)
    for _ in range(5):
        request = sent(link)
        await asyncio.sleep(0.01)
        peer.answer(1)
        assert await asyncio.wait_for(request.future, WAIT_S) == b"+OK\r\n"
    await asyncio.sleep(0.1)
    assert lease.asked == [] and link.connected


async def test_a_connection_closed_by_the_peer_fails_what_waits(peer: Peer) -> None:
    link = await linked(peer)
    request = sent(link)
    await asyncio.sleep(0.05)
    assert peer.writer is not None
    peer.writer.close()
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(request.future, WAIT_S)
    assert not link.connected


async def _introductions(front: bool, name: bytes) -> list[list[bytes]]:
    """What a link says before any request, to a peer that answers every request: a
    nonce to EMQ.FRONT CHALLENGE, +OK to anything else."""
    heard: list[list[bytes]] = []
    done = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            while (argv := parser.gets()) is not False:
                heard.append(argv)
                writer.write(b"$5\r\nnonce\r\n" if argv[1:2] == [b"CHALLENGE"] else b"+OK\r\n")
        writer.close()
        await writer.wait_closed()
        done.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        link = Link(f"127.0.0.1:{port}".encode(), 2, front=front, name=name)
        await asyncio.wait_for(link.connect("secret"), WAIT_S)
        link.close()
        await asyncio.wait_for(done.wait(), WAIT_S)
    finally:
        server.close()
    return heard


@pytest.mark.parametrize("name", [b"", b"worker-1"])
async def test_a_link_to_a_front_proves_the_password_and_never_sends_it(name: bytes) -> None:
    heard = await _introductions(True, name)
    assert [argv[:2] for argv in heard[:2]] == [[b"EMQ.FRONT", b"CHALLENGE"],
                                                [b"EMQ.FRONT", heard[1][1]]]
    assert heard[1][2] == b"PROOF"
    assert not any(b"secret" in part for argv in heard for part in argv), heard
    assert ([b"CLIENT", b"SETNAME", name] in heard) == bool(name)


async def test_a_link_to_a_node_logs_in_with_its_password() -> None:
    assert await _introductions(False, b"") == [[b"AUTH", b"secret"]]
