"""A front that joins takes its share of the queues in use, and one that leaves hands its
over (issue 35): three fronts of their own over a cluster of their own (this module's),
so that the shares are theirs alone.
"""

from __future__ import annotations

import time

from tests.cluster.support import Cluster, front, until
from tests.cluster.test_spread import FLAGS, address, cmd, owned, start_fronts_with_password
from tests.support import ServerProcess


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
