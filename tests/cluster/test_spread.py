"""Queues over several fronts (issue 35): spread by rendezvous hashing, handed over when
a front joins or leaves, let go when idle; reads that take nothing; a pipeline through a
front that does not own the queue; and the fronts' own keys and proofs kept from clients.

A real cluster (3 primaries, a replica each) and fronts with a password, a short
lease and a short idle time.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from emqd.cluster.names import owner_key
from emqd.commands.fronts import proof
from tests.cluster.support import Cluster, front, until
from tests.support import RawClient, ServerProcess, start_emqd

PASSWORD = "spread-secret"
IDLE_MS = 3000
FLAGS = ("--requirepass", PASSWORD, "--cluster-lease-ms", "2000", "--cluster-idle-ms",
         str(IDLE_MS))


@pytest.fixture(scope="module")
def trio(cluster: Cluster) -> Iterator[list[ServerProcess]]:
    started = start_fronts_with_password(cluster, 3)
    yield started
    for server in started:
        server.stop()


def start_fronts_with_password(cluster: Cluster, count: int) -> list[ServerProcess]:
    started: list[ServerProcess] = []
    try:
        for _ in range(count):
            started.append(front(cluster, *FLAGS))
        for server in started:
            until(lambda server=server: live(server) >= count, 10, "the fronts see each other")
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def client(server: ServerProcess) -> redis.Redis:
    return redis.Redis(port=server.port, password=PASSWORD, socket_timeout=30)


def cmd(server: ServerProcess, *argv: object) -> object:
    with client(server) as c:
        return c.execute_command(*argv)


def live(server: ServerProcess) -> int:
    with client(server) as c:
        return int(c.info("cluster")["emqd_cluster_fronts_live"])


def owned(server: ServerProcess) -> int:
    with client(server) as c:
        return int(c.info("cluster")["emqd_cluster_queues_owned"])


def address(server: ServerProcess) -> bytes:
    return f"127.0.0.1:{server.port}".encode()


def test_queues_spread_over_the_fronts_whichever_front_is_asked(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    queues = [f"spread{i}" for i in range(30)]
    for queue in queues:  # all through one front; each with a job running, so that
        assert cmd(trio[0], "EMQ.ADD", queue, "x")  # none is let go as idle (IDLE_MS)
        assert cmd(trio[0], "EMQ.CLAIM", queue, 600_000)  # before it is looked at below
    owners = Counter(cmd(trio[1], "EMQ.OWNER", queue) for queue in queues)
    assert set(owners) == {address(server) for server in trio}
    assert all(6 <= n <= 14 for n in owners.values()), owners
    with cluster.client() as store:  # each where EMQ.OWNER says, by its lease
        for queue in queues:
            value = store.get(owner_key(queue.encode()))
            assert value is not None and value.endswith(b" " + cmd(trio[2], "EMQ.OWNER", queue))


def test_a_reader_takes_nothing_of_a_queue_that_does_not_exist(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    stats = cmd(trio[0], "EMQ.STATS", "never-added")
    assert stats[b"pending"] == 0  # type: ignore[index]
    assert cmd(trio[1], "EMQ.OWNER", "never-added") in {address(server) for server in trio}
    with cluster.client() as store:
        assert store.get(owner_key(b"never-added")) is None
        assert store.zscore("emq:queues", "never-added") is None


def test_an_idle_queue_is_let_go_and_taken_again_when_asked(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    assert cmd(trio[0], "EMQ.ADD", "idle-one", "later", "DELAY", 600_000) == b"1"
    with cluster.client() as store:
        until(lambda: store.get(owner_key(b"idle-one")) is None, IDLE_MS / 1000 + 7,
              "the idle queue let go")
        assert store.zscore("emq:dues", "idle-one") is not None  # its delayed job's time
    assert cmd(trio[1], "EMQ.PROMOTE", "idle-one", "ID", "1") == 1  # taken again, at once
    assert cmd(trio[2], "EMQ.CLAIM", "idle-one", 30_000)[:3] == [b"1", b"1", b"later"]  # type: ignore[index]


def test_a_pipeline_through_a_front_that_does_not_own_the_queue_stays_one_and_in_order(
        trio: list[ServerProcess]) -> None:
    queue = "piped"
    owner = cmd(trio[0], "EMQ.OWNER", queue)
    other = next(server for server in trio if address(server) != owner)
    assert cmd(other, "EMQ.ADD", queue, "first", "ID", "first") == b"first"
    with client(other) as c:
        pipe = c.pipeline(transaction=False)
        for i in range(2000):
            pipe.execute_command("EMQ.ADD", queue, f"p{i}", "ID", f"j{i}")
            if i % 500 == 0:
                pipe.execute_command("PING")  # a request run here, between them
        replies = pipe.execute()
    assert [r for r in replies if r != b"PONG" and r is not True] == \
        [f"j{i}".encode() for i in range(2000)]
    assert cmd(trio[0], "EMQ.STATS", queue)[b"pending"] == 2001  # type: ignore[index]


def test_the_fronts_own_keys_are_read_by_clients_not_written(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    cmd(trio[0], "EMQ.ADD", "kept-keys", "x")
    for argv in (("DEL", "emq:queues"), ("ZADD", "emq:fronts", 1, "127.0.0.1:1"),
                 ("HSET", "emq:owned:127.0.0.1:1", "q", "1"), ("ZREM", "emq:dues", "q")):
        with pytest.raises(redis.ResponseError, match="fronts' own keys"):
            cmd(trio[1], *argv)
    assert b"kept-keys" in cmd(trio[1], "ZRANGE", "emq:queues", 0, -1)  # type: ignore[operator]
    with cluster.client() as store:
        assert store.zscore("emq:queues", "kept-keys") is not None


def test_a_front_proves_it_knows_the_password_and_never_sends_it(
        trio: list[ServerProcess]) -> None:
    target = address(trio[0])
    anonymous = RawClient(trio[0].port)  # no AUTH
    try:
        assert anonymous.command("PING").startswith(b"-NOAUTH")
        nonce = anonymous.command("EMQ.FRONT", "CHALLENGE").split(b"\r\n")[1]
        assert anonymous.command("EMQ.FRONT", target, "PROOF", "0" * 64).startswith(
            b"-WRONGPASS")
        assert anonymous.command("EMQ.FRONT", target, "PROOF", proof(
            PASSWORD, nonce, target)).startswith(b"-WRONGPASS")  # that nonce was spent
        nonce = anonymous.command("EMQ.FRONT", "CHALLENGE").split(b"\r\n")[1]
        assert anonymous.command("EMQ.FRONT", target, "PROOF",
                                 proof(PASSWORD, nonce, target)) == b"+OK\r\n"
        assert anonymous.command("PING") == b"+PONG\r\n"  # authenticated by the proof
    finally:
        anonymous.close()


class Listener:
    """A TCP port that only counts who connects (a stranger's address)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def test_an_owner_key_naming_no_front_gets_no_request_and_no_proof(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    stranger = Listener()
    try:
        with cluster.client() as store:
            store.set(owner_key(b"hijacked"), f"{'0' * 40} 127.0.0.1:{stranger.port}",
                      px=2000)
        started = time.monotonic()
        assert cmd(trio[0], "EMQ.ADD", "hijacked", "x") == b"1"  # once the lease ran out
        assert time.monotonic() - started < 2 + 5 + 3
        assert stranger.connections == 0
    finally:
        stranger.close()


def test_a_second_process_with_a_live_front_s_address_refuses_to_start(
        cluster: Cluster, trio: list[ServerProcess]) -> None:
    taken = address(trio[0]).decode()
    with pytest.raises(RuntimeError, match="another live front announces"):
        start_emqd("--cluster", cluster.seeds, *FLAGS, "--cluster-announce", taken)
