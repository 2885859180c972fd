"""A real Redis Cluster (Debian's redis-server in cluster mode) and emqd fronts over it.

`Cluster.start(primaries, replicas)` starts the nodes on free loopback ports
below the ephemeral range (a node's cluster bus listens on its port + 10000;
emqd.bench.cluster.cluster_ports), joins them with
`redis-cli --cluster create`, and waits for `cluster_state:ok`. Every process
is stopped by its PID in `stop()`, also when a later one failed to start.
`front(cluster)` starts an emqd front on it (tests/support.py's start_emqd).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from emqd.bench.cluster import cluster_ports
from tests.support import ServerProcess, redis_server_path, scratch, start_emqd

READY_S = 20.0


def until(condition: Callable[[], Any], timeout: float, what: str, pause: float = 0.05) -> Any:
    """Poll `condition` until it is truthy (its value), for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (redis.RedisError, OSError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(pause)


def replicas_synced(nodes: list[redis.Redis]) -> bool:
    """Every replica streaming, as both ends see it: its link up, and its primary
    counting it `online`. A replica can say up while its primary is still busy with a
    second full sync of it (state `wait_bgsave`), writes then not reaching it. Closes
    the clients."""
    replicas = online = 0
    for node in nodes:
        with node:
            info = node.info("replication")
        if info["role"] == "slave":
            replicas += 1
            if info.get("master_link_status") != "up":
                return False
        else:
            online += sum(1 for key, value in info.items() if key.startswith("slave")
                          and isinstance(value, dict) and value.get("state") == "online")
    return online == replicas


def replicas_streaming(nodes: list[redis.Redis]) -> None:
    """Return once each primary's replicas take its writes. After a diskless sync a
    primary streams to a replica only once the replica has acknowledged (its ACK comes
    once a second): a write made before then, and a failover, lose it. A write
    (FLUSHALL: the primaries are empty yet) and a WAIT on the same connection ask the
    replicas for that acknowledgement now. Closes the clients."""
    for node in nodes:
        with node:
            info = node.info("replication")
            if info["role"] != "master" or not info["connected_slaves"]:
                continue
            node.flushall()
            acked = node.execute_command("WAIT", info["connected_slaves"], 10_000)
            assert acked == info["connected_slaves"], (acked, info)


class Cluster:
    def __init__(self, auth: tuple[str, str] | None = None) -> None:
        self.nodes: list[ServerProcess] = []
        self.workdir = tempfile.mkdtemp(prefix="cluster-", dir=scratch())
        self.auth = auth  # (user, password) the tests' own clients give the nodes

    @classmethod
    def start(cls, primaries: int = 3, replicas: int = 1, node_args: tuple[str, ...] = (),
              auth: tuple[str, str] | None = None) -> Cluster:
        """`node_args`: more of redis-server's flags (an ACL's users); `auth`: the user and
        password the tests (and redis-cli) give the nodes then."""
        cluster = cls(auth)
        try:
            cluster._start(primaries, replicas, node_args)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start(self, primaries: int, replicas: int, node_args: tuple[str, ...]) -> None:
        for port in cluster_ports(primaries * (1 + replicas)):
            self.nodes.append(self._node(port, node_args))
        login = ["--user", self.auth[0], "--pass", self.auth[1]] if self.auth else []
        create = ["redis-cli", *login, "--cluster", "create",
                  *(f"127.0.0.1:{node.port}" for node in self.nodes),
                  "--cluster-replicas", str(replicas), "--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        for node in self.nodes:
            until(lambda node=node: self._ok(node.port), READY_S, f"node {node.port} ready")
        until(self._replicas_synced, READY_S, "replicas in sync")
        replicas_streaming([self.node(node.port) for node in self.nodes])

    def _node(self, port: int, node_args: tuple[str, ...] = ()) -> ServerProcess:
        """A cluster-enabled redis-server on `port`, keeping nothing on disk. A replica
        syncs at once (no repl-diskless-sync-delay: Redis waits 5 s by default for more
        replicas to share the transfer, which is most of a cluster's start here)."""
        return ServerProcess(
            [redis_server_path() or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
             "--cluster-node-timeout", "2000",
             "--cluster-require-full-coverage", "no",  # docs/CLUSTER.md: as we advise
             "--repl-diskless-sync-delay", "0",
             "--save", "", "--appendonly", "no", "--dir", self.workdir, *node_args], port,
            cwd=self.workdir)

    def node(self, port: int) -> redis.Redis:
        """A client of one node (as the tests' user, where the nodes ask for one)."""
        user, password = self.auth or (None, None)
        return redis.Redis(port=port, username=user, password=password)

    def _ok(self, port: int) -> bool:
        with self.node(port) as client:
            return b"cluster_state:ok" in client.execute_command("CLUSTER", "INFO")

    def _replicas_synced(self) -> bool:
        return replicas_synced([self.node(node.port) for node in self.nodes if node.running()])

    def add_replica(self, primary: ServerProcess) -> ServerProcess:
        """A new node, joined as a replica of `primary`, once it is in sync."""
        port = cluster_ports(1)[0]
        node = self._node(port)
        self.nodes.append(node)
        subprocess.run(["redis-cli", "--cluster", "add-node", f"127.0.0.1:{port}",
                        f"127.0.0.1:{primary.port}", "--cluster-slave"],
                       check=True, capture_output=True, timeout=60)
        until(self._replicas_synced, READY_S, "the new replica in sync")
        until(lambda: self._ok(port), READY_S, f"node {port} ready")
        until(lambda: self._known_as_replica(port, primary.port), READY_S,
              f"every node lists {port} as a replica of {primary.port}")
        return node

    def _known_as_replica(self, port: int, primary_port: int) -> bool:
        """Every running node's CLUSTER NODES names the node on `port` a replica of the
        one on `primary_port`: the replica's role reaches the others by gossip, after
        its sync may have finished (a front's map read meanwhile would not count it)."""
        for node in self.nodes:
            if not node.running():
                continue
            with self.node(node.port) as client:
                lines = client.execute_command("CLUSTER", "NODES").decode().splitlines()
            by_port = {int(fields[1].split("@")[0].rpartition(":")[2]): fields
                       for fields in map(str.split, lines)}
            replica, primary = by_port.get(port), by_port.get(primary_port)
            if replica is None or primary is None or "slave" not in replica[2].split(",") \
                    or replica[3] != primary[0]:
                return False
        return True

    @property
    def seeds(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:3] if node.running())

    def client(self) -> RedisCluster:
        alive = next(node for node in self.nodes if node.running())
        user, password = self.auth or (None, None)
        return RedisCluster(host="127.0.0.1", port=alive.port, username=user, password=password)

    def primary_of(self, key: bytes) -> ServerProcess:
        with self.client() as client:
            port = client.get_node_from_key(key).port
        return next(node for node in self.nodes if node.port == port)

    def replica_of(self, primary: ServerProcess) -> ServerProcess:
        """The node that replicates `primary` (one, as Cluster.start makes them)."""
        for node in self.nodes:
            if node is not primary and node.running():
                with redis.Redis(port=node.port) as client:
                    info = client.info("replication")
                if info["role"] == "slave" and int(info["master_port"]) == primary.port:
                    return node
        raise AssertionError(f"no replica of {primary.port}")

    def promoted(self, replica: ServerProcess, timeout: float = 20.0) -> None:
        """Wait until `replica` is a primary (its shard's failover is done).

        A killed primary is restarted only after this: these nodes keep no data on
        disk, and one that came back before its replica was promoted would still be
        the shard's primary, with an empty dataset its replica then copies (Redis
        Cluster's own warning about restarting primaries without persistence)."""
        def is_primary() -> bool:
            with redis.Redis(port=replica.port) as client:
                return bool(client.execute_command("ROLE")[0] == b"master")
        until(is_primary, timeout, f"replica {replica.port} promoted")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def front(cluster: Cluster, *flags: str, env: dict[str, str] | None = None) -> ServerProcess:
    """An emqd front on the cluster, on a free port below the ephemeral range."""
    port = cluster_ports(1)[0]
    return start_emqd("--cluster", cluster.seeds, *flags, port=port, env=env)


def start_fronts(cluster: Cluster, count: int, *flags: str) -> list[ServerProcess]:
    """`count` fronts, once each sees them all live (queues nobody owns are spread over
    the live fronts: each must know the others before a test names a queue's owner);
    those started are stopped if a later one fails to start."""
    started: list[ServerProcess] = []
    try:
        for _ in range(count):
            started.append(front(cluster, *flags))
        for server in started:
            until(lambda server=server: fronts_live(server) >= count, 10,
                  f"front {server.port} sees the others")
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def fronts_live(server: ServerProcess) -> int:
    with redis.Redis(port=server.port) as client:
        return int(client.info("cluster")["emqd_cluster_fronts_live"])


def name_for(fronts: list[ServerProcess], prefix: str) -> str:
    """A queue name (`prefix` and a number) nobody owns that goes to one of `fronts` (other
    fronts may serve the same cluster: a module's own, say). A front an earlier test
    stopped stays live, with no queue, until its heartbeat is LIVE_MS old, and every
    new queue goes there meanwhile: the names are looked at again until it is not."""
    ours = {f"127.0.0.1:{server.port}".encode() for server in fronts}

    def found() -> str | None:
        with redis.Redis(port=fronts[0].port) as client:
            pipe = client.pipeline(transaction=False)
            for i in range(1000):
                pipe.execute_command("EMQ.OWNER", f"{prefix}{i}")
            owners = pipe.execute()
        return next((f"{prefix}{i}" for i, owner in enumerate(owners) if owner in ours), None)
    return str(until(found, 15, f"a queue {prefix}N that goes to one of {sorted(ours)}"))


def owner_and_other(fronts: list[ServerProcess], queue: str,
                    ) -> tuple[ServerProcess, ServerProcess]:
    """The front that owns `queue` now (by EMQ.OWNER, which takes nothing), and another:
    a queue goes to whichever live front is below its share (fronts.py), so a test
    finds out who took it rather than assume. A queue one of them let go as beyond its
    share may be placed, while nobody owns it, at a front an earlier test killed (still
    in the registry until its heartbeat runs out): a read through the first front then
    takes it (the dead one does not answer), and the question is asked again."""
    ours = {f"127.0.0.1:{server.port}".encode(): server for server in fronts}

    def owner() -> bytes | None:
        with redis.Redis(port=fronts[0].port) as client:
            found = client.execute_command("EMQ.OWNER", queue)
            if found not in ours:
                client.execute_command("EMQ.STATS", queue)
            return found if found in ours else None

    mine = ours[until(owner, 15, f"{queue} owned by one of {sorted(ours)}")]
    return mine, next(server for server in fronts if server is not mine)


def just_renewed(store: RedisCluster, key: bytes | str, lease_ms: int) -> None:
    """Return right after the owner renewed the lease `key` (its PTTL went up): a fence a
    test writes now has a whole renewal period (a third of the lease) before the owner's
    next renewal reads it, drops the queue and takes it back under a new term, which
    would let the test's next write through legitimately instead of fencing it."""
    deadline = time.monotonic() + 2 * lease_ms / 1000
    last = store.pttl(key)
    while time.monotonic() < deadline:
        time.sleep(0.002)
        now = store.pttl(key)
        if now > last:
            return
        last = now
    raise AssertionError(f"{key!r} not renewed within {2 * lease_ms} ms")
