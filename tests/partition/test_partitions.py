"""Cluster mode under network partitions, on a real cluster of Redis 7 and of Valkey 9.

Each test starts a private network (net.py), a cluster of 3 primaries with a
replica each and 3 fronts, each process a host of its own (cluster.py); the
clients of each front run beside it (load.py: producers, and workers that claim
with BLOCK and complete), then the test cuts hosts apart, heals, and the judge
(history.py) reads what the clients were told and what the cluster holds:
nothing acknowledged lost, no (job, token) handed to two claims, no ADD applied
twice, no acknowledged COMPLETE undone, no client waiting past its bound.
Each scenario runs twice on each engine. Run with `./scripts/test-partitions`
(root, iproute2, iptables; docs/CLUSTER.md, "What each fault costs").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from emqd.cluster.names import owner_key
from tests.partition import history, net
from tests.partition.cluster import (
    FRONT_PORT,
    NODE_PORT,
    PASSWORD,
    ROOT,
    Front,
    NsCluster,
    until,
)

LEASE_MS = 2000
TIMEOUT_MS = 2000
BOUNDS = history.Bounds(lease_s=LEASE_MS / 1000, timeout_s=TIMEOUT_MS / 1000, slack_s=2.0)
LOAD_DEADLINE_S = 180.0  # a load process still running then has failed to stop by itself
ENGINES = ["redis", "valkey"]
RUNS = [1, 2]

pytestmark = pytest.mark.timeout(300)


def require_netns() -> None:
    why = net.available()
    if why is not None:
        if os.environ.get("EMQD_REQUIRE_NETNS") == "1":
            pytest.fail(f"EMQD_REQUIRE_NETNS=1 but {why}")
        pytest.skip(f"PARTITION TESTS SKIPPED: {why}")


class Scenario:
    """One cluster and its fronts on a network of their own, the clients' histories, and
    the judge's verdict; everything stopped and deleted by `close`."""

    def __init__(self, engine: str, workdir: Path, *front_flags: str) -> None:
        require_netns()
        net.sweep()
        self.workdir = workdir
        self.net = net.Network()
        self.loads: list[subprocess.Popen[bytes]] = []
        self.frozen: dict[str, list[tuple[float, float]]] = {}
        try:
            self.cluster = NsCluster(self.net, engine, str(workdir))
            self.cluster.start_nodes()
            flags = ["--cluster-lease-ms", str(LEASE_MS), "--cluster-timeout-ms",
                     str(TIMEOUT_MS), "--keep-completed", "1000000", *front_flags]
            self.fronts = [self.cluster.start_front(*flags) for _ in range(3)]
            for front in self.fronts:  # each knows the others (queues spread over them)
                until(lambda front=front: self.cluster.front_call(
                    front, "INFO", "cluster")["emqd_cluster_fronts_live"] >= 3, 10,
                    f"{front.host.name} sees the other fronts")
        except BaseException:
            self.close()
            raise

    def queues_of(self, front: Front, count: int = 3, on_one_primary: bool = False,
                  ) -> tuple[list[str], Any]:
        """`count` queues taken by `front`; with `on_one_primary`, all in slots one
        primary serves, and that primary. A queue nobody owns goes to a live front
        below its share (fronts.py; EMQ.OWNER names it and takes nothing), so the
        names that go to other fronts are taken too, one job each, through `front`:
        their shares grow, and `front` is below its own again."""
        names: list[str] = []
        primary = None
        ranges = self.cluster.primaries()
        for i in range(2000):
            name = f"q{i}"
            mine = self.cluster.front_call(front, "EMQ.OWNER", name).decode() == front.address
            slot = key_slot(owner_key(name.encode()))
            here = next(host for first, last, host in ranges if first <= slot <= last)
            if mine and on_one_primary and primary is not None and here is not primary:
                continue
            self.cluster.front_call(front, "EMQ.ADD", name, "first", "ID", f"first-{name}")
            if self.cluster.front_call(front, "EMQ.OWNER", name).decode() != front.address:
                continue
            primary = here
            names.append(name)
            if len(names) == count:
                break
        assert len(names) == count, f"{front.address} took {names}"
        return names, primary

    def load(self, queues: list[str], seconds: float, block_ms: int = 500) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), EMQD_PASSWORD=PASSWORD)
        for front in self.fronts:
            name = front.host.name
            self.loads.append(self.net.spawn(front.host, [
                sys.executable, "-m", "tests.partition.load", "--port", str(FRONT_PORT),
                "--name", name, "--queues", ",".join(queues), "--seconds", str(seconds),
                "--block-ms", str(block_ms), "--lease-ms", "3000",
                "--out", str(self.workdir / f"{name}.jsonl")], self.workdir / f"{name}.load.log",
                env=env))

    def wait_load(self) -> None:
        for front, process in zip(self.fronts, self.loads, strict=True):
            process.wait(timeout=LOAD_DEADLINE_S)
            log = self.workdir / f"{front.host.name}.load.log"
            assert process.returncode == 0, log.read_text()

    def freeze(self, front: Front, seconds: float) -> None:
        os.kill(front.process.pid, signal.SIGSTOP)
        started = time.time()
        try:
            time.sleep(seconds)
        finally:
            os.kill(front.process.pid, signal.SIGCONT)
            self.frozen.setdefault(front.host.name, []).append((started, time.time()))

    def settled(self) -> None:
        """Every node in the cluster, each replica in sync, after the heal."""
        for host in self.cluster.nodes.values():
            until(lambda host=host: b"cluster_state:ok" in self.cluster.node_call(
                host, "CLUSTER", "INFO"), 60, f"{host} back in the cluster")
        until(self.cluster._replicas_synced, 60, "replicas in sync")

    def dump(self, queues: list[str]) -> history.Dump:
        def read() -> history.Dump:
            first = next(iter(self.cluster.nodes.values()))
            with RedisCluster(host=first.address, port=NODE_PORT, decode_responses=True,
                              socket_timeout=10) as store:
                dumped: history.Dump = {}
                for queue in queues:
                    prefix = f"emq:{{{queue}}}:job:"
                    keys = store.scan_iter(match=prefix + "*", count=1000,
                                           target_nodes="primaries")
                    dumped[queue] = {key[len(prefix):]: store.hgetall(key) for key in keys}
                return dumped
        return self.net.in_hub(read)

    def verdict(self, queues: list[str]) -> history.Verdict:
        self.wait_load()
        self.settled()
        records = history.read(sorted(self.workdir.glob("f*.jsonl")))
        bounds = history.Bounds(BOUNDS.lease_s, BOUNDS.timeout_s, BOUNDS.slack_s, self.frozen)
        verdict = history.judge(records, self.dump(queues), bounds)
        print(f"{self.cluster.engine}: {verdict}")
        return verdict

    def close(self) -> None:
        self.net.close()

    def __enter__(self) -> Scenario:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def world(engine: str, tmp_path: Path) -> Iterator[Scenario]:
    with Scenario(engine, tmp_path) as started:
        yield started


def clean(verdict: history.Verdict) -> None:
    assert all(count == 0 for count in verdict.faults().values()), str(verdict)
    assert verdict.counts["adds acknowledged"] > 50 and verdict.counts["claims"] > 20, verdict


@pytest.mark.parametrize("run", RUNS)
def test_a_front_cut_off_for_twice_its_lease_then_healed(world: Scenario, run: int) -> None:
    queues, _ = world.queues_of(world.fronts[0])
    world.load(queues, seconds=14)
    time.sleep(3)
    world.net.cut([world.fronts[0].host])
    time.sleep(2 * LEASE_MS / 1000 + 1)
    world.net.heal()
    clean(world.verdict(queues))


@pytest.mark.parametrize("run", RUNS)
def test_a_claim_parked_on_a_front_then_cut_off_hands_out_no_token_twice(
        world: Scenario, run: int) -> None:
    """The front's own producers go on adding while it is cut off: each ADD wakes a
    CLAIM parked on it, and neither may be answered with the job (issue 34, 1)."""
    queues, _ = world.queues_of(world.fronts[0], 1)
    world.load(queues, seconds=14, block_ms=5000)
    time.sleep(3)
    world.net.cut([world.fronts[0].host])
    time.sleep(6)
    world.net.heal()
    clean(world.verdict(queues))


@pytest.mark.parametrize("run", RUNS)
def test_a_primary_cut_off_with_its_owner_front_loses_nothing_acknowledged_by_default(
        world: Scenario, run: int) -> None:
    """After a failover of the shard (its old primary back as the new one's replica),
    the new primary is cut off together with the front that owns the queues: by
    default every write waits for that replica, so nothing acknowledged is lost
    (issue 34, 2: a slot map read during the failover kept the shard at 0)."""
    queues, primary = world.queues_of(world.fronts[0], on_one_primary=True)
    world.load(queues, seconds=34)
    time.sleep(2)
    replica = world.cluster.replica_of(primary)
    assert replica is not None
    world.net.cut([primary])  # the first failover: the replica is promoted
    until(lambda: world.cluster.role(replica) == "master", 30, "the promotion")
    world.net.heal()
    until(lambda: world.cluster.replica_of(replica) is primary, 30, "the old primary back")
    time.sleep(3)
    world.net.cut([replica, world.fronts[0].host])  # now the shard's primary, with the owner
    time.sleep(8)
    world.net.heal()
    clean(world.verdict(queues))


@pytest.mark.parametrize("acks", [None, "1", "0"])
@pytest.mark.parametrize("run", RUNS)
def test_a_replica_cut_off_loses_nothing_and_applies_no_forwarded_add_twice(
        engine: str, tmp_path: Path, acks: str | None, run: int) -> None:
    """The owner's writes wait for a replica that does not answer (by default until it
    is marked failed; with 1 until it is back; with 0 not at all), each one answered
    TRYAGAIN meanwhile, and a front that forwarded one does not send it again: it may
    have been applied (issue 34, 3)."""
    flags = () if acks is None else ("--cluster-acks", acks)
    with Scenario(engine, tmp_path, *flags) as world:
        queues, primary = world.queues_of(world.fronts[0], on_one_primary=True)
        world.load(queues, seconds=16)
        time.sleep(3)
        replica = world.cluster.replica_of(primary)
        assert replica is not None
        world.net.cut([replica])
        time.sleep(8)
        world.net.heal()
        clean(world.verdict(queues))


@pytest.mark.parametrize("run", RUNS)
def test_a_front_frozen_for_twenty_seconds_holds_nobody_past_the_bound(
        world: Scenario, run: int) -> None:
    """Clients of the other fronts are answered within the lease and the timeout, and
    the frozen front's own within that once it runs again (issue 34, 4)."""
    queues, _ = world.queues_of(world.fronts[0])
    world.load(queues, seconds=30)
    time.sleep(3)
    world.freeze(world.fronts[0], 20)
    clean(world.verdict(queues))


@pytest.mark.parametrize("acks", ["1", "0"])
@pytest.mark.parametrize("run", RUNS)
def test_a_primary_cut_off_with_its_owner_front_under_each_explicit_ack_setting(
        engine: str, tmp_path: Path, acks: str, run: int) -> None:
    """`--cluster-acks 1` loses nothing either; `0` prefers answering, and the writes its
    primary acknowledged alone are lost with it (docs/CLUSTER.md's table)."""
    with Scenario(engine, tmp_path, "--cluster-acks", acks) as world:
        queues, primary = world.queues_of(world.fronts[0], on_one_primary=True)
        world.load(queues, seconds=18)
        time.sleep(3)
        world.net.cut([primary, world.fronts[0].host])
        time.sleep(8)
        world.net.heal()
        verdict = world.verdict(queues)
        if acks == "1":
            clean(verdict)
        else:
            assert verdict.late == [], str(verdict)
            assert verdict.lost or verdict.completions_undone or verdict.tokens_twice, \
                f"acks 0 lost nothing this time: {verdict}"


def test_the_judge_sees_the_network_it_was_given(tmp_path: Path) -> None:
    """The hub reaches a host, and a cut host is out of reach until healed."""
    require_netns()
    net.sweep()
    network = net.Network()
    try:
        host = network.host("a")
        network.spawn(host, [sys.executable, "-m", "http.server", "--bind", host.address,
                             "8000"], tmp_path / "a.log")

        def get() -> bytes:
            import socket
            with socket.create_connection((host.address, 8000), timeout=1) as sock:
                sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                return sock.recv(12)

        assert until(lambda: network.in_hub(get), 10, "the host's server") == b"HTTP/1.0 200"
        network.cut([host])
        with pytest.raises(OSError):
            network.in_hub(get)
        network.heal()
        assert network.in_hub(get) == b"HTTP/1.0 200"
    finally:
        network.close()
    assert not [line for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                text=True).stdout.splitlines()
                if line.startswith(f"{net.PREFIX}-{os.getpid()}-")]
