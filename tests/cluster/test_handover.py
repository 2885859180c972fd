"""A front that joins takes its share of the queues in use, and one that leaves hands its
over (issue 35): three fronts of their own over a cluster of their own (this module's),
so that the shares are theirs alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from emqd.cluster.fronts import FRONTS_INFO
from emqd.config import Config
from tests.cluster.support import Cluster, front, until
from tests.cluster.test_spread import (
    FLAGS,
    PASSWORD,
    address,
    cmd,
    owned,
    start_fronts_with_password,
)
from tests.partition import history
from tests.support import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
LOAD_S = 60  # the clients' longest run: they are stopped (SIGINT) once the scenario is over
LOAD_DEADLINE_S = 120.0  # a load process still running then has failed to stop by itself


def test_a_front_that_joins_takes_its_share_and_one_that_leaves_hands_it_over(
        cluster: Cluster) -> None:
    """Three fronts, 30 queues in use; a fourth joins and owns some of them within
    15 s; it leaves (SIGTERM) and they are served by the others within 5 s."""
    fronts = start_fronts_with_password(cluster, 3)
    fourth: ServerProcess | None = None
    queues = [f"share{i}" for i in range(30)]
    try:
        for queue in queues:
            cmd(fronts[0], "EMQ.ADD", queue, "x")
        # A front judges its share by the loads the others' last heartbeats said: joined
        # within a second of the queues being taken, the fourth would be judged by loads
        # that miss some of them (docs/CLUSTER.md). It joins a cluster at rest here.
        until(lambda: reported_load(cluster) == len(queues), 10, "every load heartbeated")
        fourth = front(cluster, *FLAGS)
        deadline = time.monotonic() + 15
        while owned(fourth) < 5:  # the queues stay in use, each request through front 0
            assert time.monotonic() < deadline, \
                f"owned: {[owned(server) for server in (*fronts, fourth)]}"
            for queue in queues:
                cmd(fronts[0], "EMQ.STATS", queue)
        mine = [queue for queue in queues if cmd(fronts[1], "EMQ.OWNER", queue)
                == address(fourth)]
        assert len(mine) >= 5
        fourth.stop()  # SIGTERM: hands them over
        started = time.monotonic()
        for queue in mine:
            stats = until(lambda queue=queue: cmd(fronts[0], "EMQ.STATS", queue), 5,
                          f"{queue} served again")
            assert stats[b"pending"] == 1  # type: ignore[index]
        assert time.monotonic() - started < 5
        assert all(cmd(fronts[2], "EMQ.OWNER", queue) != address(fourth) for queue in mine)
    finally:
        if fourth is not None:
            fourth.stop()
        for server in fronts:
            server.stop()


def test_fronts_joining_and_leaving_under_load_lose_no_job_and_run_none_twice(
        cluster: Cluster, tmp_path: Path) -> None:
    """Three fronts share 30 queues (10 +/- 4 each); clients of every front add and
    claim on all of them (tests/partition/load.py) while a fourth front joins, takes
    at least 5 of them within 15 s, and leaves (SIGTERM), its queues served by the
    others within 5 s. What the clients were told and what the cluster holds then
    agree (tests/partition/history.py): nothing acknowledged lost, no token handed out
    twice, no ADD applied twice, no COMPLETE undone, no request answered past its bound."""
    fronts = start_fronts_with_password(cluster, 3)
    fourth: ServerProcess | None = None
    loads: list[subprocess.Popen[bytes]] = []
    queues = [f"busy{i}" for i in range(30)]
    try:
        for queue in queues:
            cmd(fronts[0], "EMQ.ADD", queue, "first", "ID", f"first-{queue}")
        until(lambda: all(6 <= owned(server) <= 14 for server in fronts), 10,
              "10 +/- 4 queues a front")
        env = dict(os.environ, PYTHONPATH=str(ROOT), EMQD_PASSWORD=PASSWORD)
        for i, server in enumerate(fronts):
            with open(tmp_path / f"f{i}.log", "wb") as log:
                loads.append(subprocess.Popen(
                    [sys.executable, "-m", "tests.partition.load", "--port", str(server.port),
                     "--name", f"f{i}", "--queues", ",".join(queues), "--seconds", str(LOAD_S),
                     "--out", str(tmp_path / f"f{i}.jsonl")],
                    stdout=log, stderr=subprocess.STDOUT, env=env))
        time.sleep(3)
        fourth = front(cluster, *FLAGS)
        until(lambda: owned(fourth) >= 5, 15, "the fourth front takes its share under load")
        time.sleep(3)
        mine = [queue for queue in queues
                if cmd(fronts[0], "EMQ.OWNER", queue) == address(fourth)]
        assert mine
        fourth.stop()  # SIGTERM: hands them over
        until(lambda: not any(cmd(fronts[1], "EMQ.OWNER", queue) == address(fourth)
                              for queue in mine), 5, "its queues moved within 5 s")
        time.sleep(2)  # served where they moved to, then the clients stop (load.py: SIGINT)
        for process in loads:
            process.send_signal(signal.SIGINT)
        for i, process in enumerate(loads):
            assert process.wait(timeout=LOAD_DEADLINE_S) == 0, \
                (tmp_path / f"f{i}.log").read_text()
        records = history.read(sorted(tmp_path.glob("f*.jsonl")))
        verdict = history.judge(records, dump(cluster, queues), history.Bounds(
            lease_s=2.0, timeout_s=Config().cluster_timeout_ms / 1000, slack_s=2.0))
        assert all(count == 0 for count in verdict.faults().values()), str(verdict)
        assert verdict.counts["adds acknowledged"] > 200 and verdict.counts["claims"] > 100, \
            str(verdict)
    finally:
        for process in loads:
            process.kill()
            process.wait()
        if fourth is not None:
            fourth.stop()
        for server in fronts:
            server.stop()


def reported_load(cluster: Cluster) -> int:
    """The queues owned, as the fronts' last heartbeats said (fronts.py `beat`)."""
    with cluster.client() as store:
        infos = store.hvals(FRONTS_INFO)
    return sum(int(info.split(b" ")[2]) for info in infos)


def dump(cluster: Cluster, queues: list[str]) -> history.Dump:
    """Every job row of `queues`, read from the cluster's primaries."""
    dumped: history.Dump = {}
    with cluster.client() as store:
        for queue in queues:
            prefix = f"emq:{{{queue}}}:job:"
            keys = store.scan_iter(match=prefix + "*", count=1000, target_nodes="primaries")
            dumped[queue] = {key.decode()[len(prefix):]: {
                field.decode(): value.decode() for field, value in store.hgetall(key).items()}
                for key in keys}
    return dumped
