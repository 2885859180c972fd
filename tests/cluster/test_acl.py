"""The ACL setup of docs/CLUSTER.md ("Keeping clients out of the fronts' keys"): the
nodes' default user is off, the fronts log in as a user of their own, and the
application's user may read `emq:*` on the nodes but not write it.

A cluster of its own (3 primaries, a replica each, whose replicas log in to their
primaries as the fronts' user) and two fronts with `--cluster-user` and
`EMQD_CLUSTER_PASSWORD`.
"""

from __future__ import annotations

import tempfile

import pytest
import redis

from tests.cluster.conftest import need_redis
from tests.cluster.support import Cluster, fronts_live, until
from tests.cluster.support import front as start_front
from tests.support import scratch

FRONTS_USER, FRONTS_PASSWORD = "emqd-fronts", "fronts-secret"
APP_USER, APP_PASSWORD = "app", "app-secret"
USERS = (  # docs/CLUSTER.md's setup: an ACL file (the same lines go in redis.conf)
    "user default off\n"
    f"user {FRONTS_USER} on >{FRONTS_PASSWORD} ~* &* +@all\n"
    f"user {APP_USER} on >{APP_PASSWORD} %R~emq:* ~app:* +@all -@dangerous\n"
)


def test_the_application_reads_the_queues_on_the_nodes_and_writes_them_only_through_a_front(
        ) -> None:
    need_redis()
    users = tempfile.NamedTemporaryFile(  # noqa: SIM115
        "w", suffix=".acl", delete=False, dir=scratch())
    with users:
        users.write(USERS)
    cluster = Cluster.start(node_args=("--aclfile", users.name, "--masteruser", FRONTS_USER,
                                       "--masterauth", FRONTS_PASSWORD),
                            auth=(FRONTS_USER, FRONTS_PASSWORD))
    fronts = []
    try:
        env = {"EMQD_CLUSTER_PASSWORD": FRONTS_PASSWORD}
        for _ in range(2):
            fronts.append(start_front(cluster, "--cluster-user", FRONTS_USER, env=env))
        for server in fronts:
            until(lambda server=server: fronts_live(server) >= 2, 10, "two fronts live")
        with redis.Redis(port=fronts[1].port) as client:
            assert client.execute_command("EMQ.ADD", "acl", "x", "ID", "a") == b"a"
            assert client.execute_command("EMQ.CLAIM", "acl", 30_000)[:2] == [b"a", b"1"]
            assert client.execute_command("HSET", "app:settings", "f", "v") == 1  # relayed
        node = cluster.primary_of(b"emq:{acl}:owner")
        with redis.Redis(port=node.port, username=APP_USER, password=APP_PASSWORD) as app:
            assert app.hget("emq:{acl}:job:a", "state") == b"active"
            with pytest.raises(redis.exceptions.NoPermissionError):
                app.hset("emq:{acl}:job:a", "state", "completed")
            with pytest.raises(redis.exceptions.NoPermissionError):
                app.delete("emq:{acl}:owner")
            assert app.hset("app:{acl}:mine", "f", "v") == 1  # its own keys (this slot)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=node.port).ping()  # the default user is off
    finally:
        for server in fronts:
            server.stop()
        cluster.stop()
