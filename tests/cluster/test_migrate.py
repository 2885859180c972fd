"""`emqd --migrate-to-cluster` (emqd/cluster/migrate.py): a single emqd's queues, from its
append-only file, into a cluster, served by fronts as the single process left them;
refused, writing nothing, where the cluster has a queue already or a flow spans queues."""

from __future__ import annotations

import subprocess
import sys
import tempfile

import redis

from tests.cluster.support import Cluster, fronts_live, start_fronts, until
from tests.support import ROOT, scratch, start_emqd


def migrate(directory: str, seeds: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emqd", "--dir", directory,
                           "--migrate-to-cluster", seeds], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def single(directory: str, *requests: tuple[object, ...]) -> list[object]:
    """Run `requests` on a single emqd keeping its log in `directory`, then stop it."""
    server = start_emqd("--appendonly", "yes", dir=directory)
    try:
        with redis.Redis(port=server.port) as client:
            return [client.execute_command(*argv) for argv in requests]
    finally:
        server.stop()


def test_the_queues_of_a_single_emqd_are_served_by_fronts_as_it_left_them(
        cluster: Cluster) -> None:
    directory = tempfile.mkdtemp(prefix="migrate-", dir=scratch())
    replies = single(directory,
                     ("EMQ.ADD", "moved-a", "first", "ID", "j1"),
                     ("EMQ.ADD", "moved-a", "second", "ID", "j2"),
                     ("EMQ.CLAIM", "moved-a", 600_000),
                     ("EMQ.ADD", "moved-b", "later", "DELAY", 600_000),
                     ("EMQ.ADD", "moved-b", "done"),
                     ("HSET", "app:left", "out", "1"))
    assert replies[2][:2] == [b"j1", b"1"]  # type: ignore[index]
    done = migrate(directory, cluster.seeds)
    assert done.returncode == 0, done.stderr
    assert "2 queue(s) written" in done.stdout and "app:left" in done.stderr
    fronts = start_fronts(cluster, 2)
    try:
        for server in fronts:
            until(lambda server=server: fronts_live(server) >= 2, 10, "two fronts live")
        with redis.Redis(port=fronts[1].port) as client:
            stats = client.execute_command("EMQ.STATS", "moved-a")
            assert (stats[b"pending"], stats[b"active"]) == (1, 1)
            claimed = client.execute_command("EMQ.CLAIM", "moved-a", 30_000)
            assert (claimed[0], claimed[2]) == (b"j2", b"second")  # (its token as it was)
            assert client.execute_command("EMQ.GET", "moved-b", "1")[b"state"] == b"scheduled"
            assert b"moved-a" in client.execute_command("EMQ.QUEUES")
            # ids go on where the single process left them
            assert client.execute_command("EMQ.ADD", "moved-b", "new") == b"3"
        again = migrate(directory, cluster.seeds)  # the cluster has them now: refused
        assert again.returncode == 1 and "already" in again.stderr
    finally:
        for server in fronts:
            server.stop()


def test_a_flow_across_queues_is_refused_and_nothing_is_written(cluster: Cluster) -> None:
    directory = tempfile.mkdtemp(prefix="migrate-", dir=scratch())
    single(directory, ("EMQ.FLOW", "flow-parent", "p", "CHILD", "flow-child", "c"))
    done = migrate(directory, cluster.seeds)
    assert done.returncode == 1 and "flow across queues" in done.stderr
    with cluster.client() as store:
        assert store.zscore("emq:queues", "flow-parent") is None
        assert not store.exists("emq:{flow-parent}:pending", "emq:{flow-child}:pending")
