"""Two fronts over one real cluster: a queue is served through either, owned by one.

The cluster is Debian's redis-server in cluster mode, 3 primaries with a
replica each (conftest.py). Each test uses queues of its own.
"""

from __future__ import annotations

import concurrent.futures
import signal
import time
import urllib.request
from collections.abc import Iterator

import pytest
import redis
from redis.exceptions import ClusterCrossSlotError, TryAgainError

from emqd.bench.cluster import cluster_ports
from emqd.http.security import CSRF_COOKIE
from tests.cluster.support import (
    Cluster,
    front,
    fronts_live,
    just_renewed,
    name_for,
    owner_and_other,
    start_fronts,
    until,
)
from tests.http.web import Web
from tests.support import ServerProcess, free_port, start_emqd

LEASE_MS = 2000


@pytest.fixture(scope="module")
def fronts(cluster: Cluster) -> Iterator[list[ServerProcess]]:
    started = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    yield started
    for server in started:
        server.stop()


def cmd(port: int, *argv: object) -> object:
    with redis.Redis(port=port) as client:
        return client.execute_command(*argv)


def test_every_verb_through_a_front_that_does_not_own_the_queue(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    verbs = "verbs"
    assert cmd(fronts[0].port, "EMQ.ADD", verbs, "first") == b"1"  # a front takes it
    owner, other = owner_and_other(fronts, verbs)
    assert cmd(other.port, "EMQ.OWNER", verbs) == cmd(owner.port, "EMQ.OWNER", verbs) \
        == f"127.0.0.1:{owner.port}".encode()
    with redis.Redis(port=other.port) as client:
        run = client.execute_command
        assert run("EMQ.ADD", verbs, "second", "PRIORITY", "-1") == b"2"  # claimed sooner
        assert run("EMQ.CLAIM", verbs, 30_000)[:3] == [b"2", b"1", b"second"]
        assert run("EMQ.EXTEND", verbs, "2", "1", 60_000) > 0
        assert run("EMQ.PROGRESS", verbs, "2", "1", "half") == b"OK"
        assert run("EMQ.LOG", verbs, "2", "1", "a line") == 1
        assert run("EMQ.LOGS", verbs, "2") == [b"a line"]
        assert run("EMQ.COMPLETE", verbs, "2", "1", "RESULT", "done") == b"OK"
        assert run("EMQ.CLAIM", verbs, 30_000)[:3] == [b"1", b"1", b"first"]
        assert run("EMQ.FAIL", verbs, "1", "1", "ERROR", "no", "MAXATTEMPTS", "1")[0] == b"dead"
        assert run("EMQ.REVIVE", verbs, "1") == b"OK"
        assert run("EMQ.PAUSE", verbs) == b"OK" and run("EMQ.RESUME", verbs) == b"OK"
        stats = run("EMQ.STATS", verbs)
        assert (stats[b"pending"], stats[b"completed"]) == (1, 1)
        assert run("EMQ.REMOVE", verbs, "1") == 1
        row = run("HGETALL", f"emq:{{{verbs}}}:job:2")  # a plain command on a queue's key
        assert row == cluster.client().hgetall(f"emq:{{{verbs}}}:job:2") != {}
        assert verbs.encode() in run("EMQ.QUEUES")


def test_the_other_verbs_and_the_parking_ones_through_a_front_that_does_not_own_it(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """The rest of section 5 through the other front: settings, promotion, REQUEUE, the
    sweep verb, a flow within the queue, schedules, rates and lanes; and a blocking
    CLAIM and an EMQ.WAIT parked on the other front, woken by the owner's writes."""
    more, parked = "more", "parked"
    assert cmd(fronts[0].port, "EMQ.ADD", more, "a") == b"1"  # a front takes it
    owner, other = owner_and_other(fronts, more)
    with redis.Redis(port=other.port) as client:
        run = client.execute_command
        assert run("EMQ.CONFIG", more, "SET", "keep_completed", "50") == b"OK"
        assert run("EMQ.CONFIG", more, "GET", "keep_completed") == b"50"
        assert run("EMQ.ADD", more, "later", "DELAY", "60000") == b"2"
        assert run("EMQ.PROMOTE", more, "ID", "2") == 1
        job, token = run("EMQ.CLAIM", more, 30_000)[:2]
        assert run("EMQ.REQUEUE", more, job, token) == b"OK"
        assert run("EMQ.STALLED.CHECK", more) == [[], []]
        parent, children = run("EMQ.FLOW", more, "parent", "CHILD", more, "kid")
        assert run("EMQ.CHILDREN", more, parent) == [[more.encode(), children[0], b"pending",
                                                         None]]
        next_ms = run("EMQ.REPEAT", more, "tick", "EVERY", "60000", "t")
        assert [entry[b"name"] for entry in run("EMQ.REPEATS", more)] == [b"tick"]
        assert isinstance(next_ms, int) and run("EMQ.REPEAT.DEL", more, "tick") == 1
        assert run("EMQ.RATE", more, "100", "1000") == b"OK"
        assert run("EMQ.LANE.LIMIT", more, "g", "2") == b"OK"
        assert run("EMQ.LANE.RATE", more, "g", "5", "1000") == b"OK"
        grouped = run("EMQ.ADD", more, "grouped", "GROUP", "g")
        assert run("EMQ.LANES", more) == {b"g": [1, 0]}
        assert run("EMQ.GET", more, grouped)[b"payload"] == b"grouped"
    assert cmd(fronts[0].port, "EMQ.ADD", parked, "taken") == b"1"  # a front takes `parked`
    owner, other = owner_and_other(fronts, parked)
    assert cmd(owner.port, "EMQ.REMOVE", parked, "1") == 1
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        claim = pool.submit(cmd, other.port, "EMQ.CLAIM", parked, 30_000, "BLOCK", 10_000)
        time.sleep(0.3)
        assert not claim.done()  # parked
        job_id = cmd(owner.port, "EMQ.ADD", parked, "woken")
        claimed = claim.result(timeout=10)
        assert claimed[:3] == [job_id, b"1", b"woken"]  # type: ignore[index]
        waiting = pool.submit(cmd, other.port, "EMQ.WAIT", parked, job_id, 10_000)
        time.sleep(0.3)
        assert not waiting.done()
        assert cmd(owner.port, "EMQ.COMPLETE", parked, job_id, b"1", "RESULT", "r") == b"OK"
        assert waiting.result(timeout=10) == [b"completed", b"r"]


def test_the_cluster_holds_each_acknowledged_write_in_the_single_process_layout(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    owner, other = fronts
    ids = [cmd(other.port, "EMQ.ADD", "layout", f"job {i}") for i in range(20)]
    with cluster.client() as store:
        assert store.zcard("emq:{layout}:pending") == 20
        assert [store.hget(f"emq:{{layout}}:job:{i.decode()}", "payload") for i in ids] == \
            [f"job {i}".encode() for i in range(20)]
        assert store.zscore("emq:queues", "layout") is not None  # the registry, apart


def test_what_spans_queues_or_leaves_them_is_refused_and_writes_nothing(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    owner, _ = fronts
    cmd(owner.port, "EMQ.ADD", "flow-a", "x")
    with redis.Redis(port=owner.port) as client:
        with pytest.raises(ClusterCrossSlotError):
            client.execute_command("EMQ.FLOW", "flow-a", "parent", "CHILD", "flow-b", "kid")
        with pytest.raises(ClusterCrossSlotError):
            client.execute_command("DEL", "emq:{flow-a}:x", "emq:{flow-b}:y")
        with pytest.raises(redis.ResponseError, match="FLUSHALL|queues' keys"):
            client.execute_command("FLUSHALL")
    with cluster.client() as store:
        assert store.zcard("emq:{flow-a}:pending") == 1
        assert not store.exists("emq:{flow-b}:pending")


def test_a_forwarding_connection_reaches_the_front_it_names_or_is_refused(
        fronts: list[ServerProcess], emqd_port: int) -> None:
    front = fronts[0]
    here = f"127.0.0.1:{front.port}"
    assert cmd(front.port, "EMQ.FRONT", here) == b"OK"
    with pytest.raises(redis.ResponseError, match="not that front"):
        cmd(front.port, "EMQ.FRONT", f"127.0.0.1:{fronts[1].port}")  # a port another took
    with pytest.raises(redis.ResponseError, match="not that front"):
        cmd(emqd_port, "EMQ.FRONT", f"127.0.0.1:{emqd_port}")  # a single process is none


def test_a_front_s_own_view_is_the_queues_it_owns(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """INFO, DBSIZE, KEYS, SCAN and /metrics on a front show the queues it owns now, not
    another front's; EMQ.QUEUES lists every queue of the cluster's registry."""
    watcher = start_emqd("--cluster", cluster.seeds, port=cluster_ports(1)[0], http=True)
    try:
        for server in (watcher, *fronts):  # each one's share is then final: none hands over
            until(lambda server=server: fronts_live(server) >= 3, 10, "three fronts live")
        names = [f"view{i}" for i in range(12)]
        for name in names:  # spread over the three fronts
            cmd(watcher.port, "EMQ.ADD", name, "x")
        owners = {name: cmd(watcher.port, "EMQ.OWNER", name) for name in names}
        here = f"127.0.0.1:{watcher.port}".encode()
        mine = next(name for name in names if owners[name] == here)
        theirs = next(name for name in names if owners[name] != here)
        assert {mine.encode(), theirs.encode()} <= set(
            cmd(watcher.port, "EMQ.QUEUES"))  # type: ignore[arg-type]
        with redis.Redis(port=watcher.port) as client:
            assert client.info("cluster")["emqd_cluster_queues_owned"] == sum(
                owner == here for owner in owners.values())
            keys = set(client.keys("*"))
            assert f"emq:{{{mine}}}:pending".encode() in keys
            assert f"emq:{{{mine}}}:job:1".encode() in keys
            assert not any(f"{{{theirs}}}".encode() in key for key in keys)
            assert client.dbsize() == len(keys)
            assert set(client.scan_iter(count=1000)) == keys
        with urllib.request.urlopen(f"http://127.0.0.1:{watcher.http_port}/metrics",
                                    timeout=10) as response:
            text = response.read().decode()
        assert f'queue="{mine}"' in text and f'queue="{theirs}"' not in text
    finally:
        watcher.stop()


def test_a_write_the_cluster_fences_is_answered_tryagain_and_written_nowhere(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """The queue's lease changes term behind its owner's back (as if another taking
    won): the owner's next write is refused by the script's term check, answered
    TRYAGAIN, and is neither in the cluster nor in the owner's memory; the queue is
    then served again from what the cluster holds."""
    fenced = "fenced"
    assert cmd(fronts[0].port, "EMQ.ADD", fenced, "kept") == b"1"
    owner, _ = owner_and_other(fronts, fenced)
    with cluster.client() as store:
        just_renewed(store, f"emq:{{{fenced}}}:owner", LEASE_MS)
        value = store.get(f"emq:{{{fenced}}}:owner")
        assert isinstance(value, bytes)
        store.set(f"emq:{{{fenced}}}:owner", b"another-term " + value.partition(b" ")[2],
                  px=LEASE_MS)
    with pytest.raises(TryAgainError):
        cmd(owner.port, "EMQ.ADD", fenced, "refused")
    with cluster.client() as store:
        assert store.zrange(f"emq:{{{fenced}}}:pending", 0, -1) == [b"1"]
        assert not store.exists(f"emq:{{{fenced}}}:job:2")
    # served again, from the cluster's keys: the refused job is nowhere
    added = until(lambda: _answer(owner.port, "EMQ.ADD", fenced, "after"), 10,
                  "the queue served again")
    assert isinstance(added, bytes)
    with cluster.client() as store:
        payloads = {store.hget(f"emq:{{{fenced}}}:job:{job.decode()}", "payload")
                    for job in store.zrange(f"emq:{{{fenced}}}:pending", 0, -1)}
    assert payloads == {b"kept", b"after"}


def _answer(port: int, *argv: object) -> object:
    """The reply, or None while the front answers TRYAGAIN."""
    try:
        return cmd(port, *argv)
    except TryAgainError:
        return None


def test_keys_outside_the_queues_are_the_cluster_s_own(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    _, other = fronts
    with redis.Redis(port=other.port) as client:
        assert client.execute_command("HSET", "app:settings", "colour", "blue") == 1
        assert client.execute_command("HGETALL", "app:settings") == {b"colour": b"blue"}
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            client.execute_command("ZADD", "app:settings", 1, "m")  # the cluster's own reply
    with cluster.client() as store:
        assert store.hgetall("app:settings") == {b"colour": b"blue"}


def test_a_killed_owner_is_replaced_within_its_lease(cluster: Cluster) -> None:
    owner, other = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    try:
        takeover = name_for([owner, other], "takeover")
        cmd(owner.port, "EMQ.ADD", takeover, "a")
        owner, other = owner_and_other([owner, other], takeover)
        assert cmd(owner.port, "EMQ.CLAIM", takeover, 1000)[:3] == [b"1", b"1", b"a"]
        owner.kill(signal.SIGKILL)
        started = time.monotonic()
        assert cmd(other.port, "EMQ.ADD", takeover, "b") == b"2"
        assert time.monotonic() - started < LEASE_MS / 1000 + 6  # a few seconds, on a busy box
        # a live front took it (this one, or another on the cluster whose adoption round
        # saw the expired lease first)
        assert cmd(other.port, "EMQ.OWNER", takeover) != f"127.0.0.1:{owner.port}".encode()
        # The lease granted under the dead owner's term runs out: it comes back uncounted,
        # as after a restart, not as a stall.
        row = until(lambda: cmd(other.port, "EMQ.GET", takeover, "1"), 1, "job 1")
        state = until(lambda: cmd(other.port, "HGET", f"emq:{{{takeover}}}:job:1", "state")
                      == b"pending", 10, "the old lease recovered")
        assert row and state
        assert cmd(other.port, "HGET", f"emq:{{{takeover}}}:job:1", "stalled") in (None, b"0")
    finally:
        owner.stop()
        other.stop()


def test_a_clean_shutdown_lets_its_leases_go_at_once(cluster: Cluster) -> None:
    """SIGTERM: the front lets go of the queues it owns before it exits, so another front
    takes one at its next request, without waiting for the lease to run out."""
    owner, other = start_fronts(cluster, 2, "--cluster-lease-ms", "60000")
    try:
        handed = name_for([owner, other], "handed")
        assert cmd(owner.port, "EMQ.ADD", handed, "x") == b"1"
        owner, other = owner_and_other([owner, other], handed)
        with cluster.client() as store:
            assert store.get(f"emq:{{{handed}}}:owner").endswith(f":{owner.port}".encode())
            owner.stop()  # SIGTERM, waited for
            assert store.get(f"emq:{{{handed}}}:owner") is None
        started = time.monotonic()
        assert cmd(other.port, "EMQ.ADD", handed, "y") == b"2"
        assert time.monotonic() - started < 10  # nowhere near the 60 s lease
    finally:
        owner.stop()
        other.stop()


def test_a_queue_no_client_asks_about_is_adopted_when_its_work_is_due(
        cluster: Cluster) -> None:
    """The owner dies holding a delayed job and a job's lease; no client ever asks about
    the queue again. Another front's adoption round takes it once both are due: the
    delayed job is promoted and the lease's job comes back, uncounted, read straight from
    the cluster."""
    owner, other = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    try:
        idle = name_for([owner, other], "idle")
        assert cmd(owner.port, "EMQ.ADD", idle, "leased") == b"1"
        owner, other = owner_and_other([owner, other], idle)
        assert cmd(owner.port, "EMQ.CLAIM", idle, 1000)[:2] == [b"1", b"1"]
        assert cmd(owner.port, "EMQ.ADD", idle, "later", "DELAY", 3000) == b"2"
        owner.kill(signal.SIGKILL)
        with cluster.client() as store:
            assert store.hget(f"emq:{{{idle}}}:job:2", "state") == b"scheduled"
            until(lambda: set(store.zrange(f"emq:{{{idle}}}:pending", 0, -1)) == {b"1", b"2"},
                  3 + LEASE_MS / 1000 + 8, "both jobs pending again, with no client asking")
            assert store.hget(f"emq:{{{idle}}}:job:1", "state") == b"pending"
            assert store.hget(f"emq:{{{idle}}}:job:1", "stalled") in (None, b"0")
            # a live front holds it: this one, or another on the cluster (each adopts)
            assert not store.get(f"emq:{{{idle}}}:owner").endswith(f":{owner.port}".encode())
    finally:
        owner.stop()
        other.stop()


def test_a_stopped_owner_woken_after_its_lease_acknowledges_nothing_for_its_queue(
        cluster: Cluster) -> None:
    owner, other = start_fronts(cluster, 2, "--cluster-lease-ms", str(LEASE_MS))
    try:
        stopped = name_for([owner, other], "stopped")
        assert cmd(owner.port, "EMQ.ADD", stopped, "before") == b"1"
        owner, other = owner_and_other([owner, other], stopped)
        with redis.Redis(port=owner.port) as stale:
            owner.send_signal(signal.SIGSTOP)
            # While it sleeps, its lease runs out and the other front takes the queue.
            until(lambda: cmd(other.port, "EMQ.ADD", stopped, "during") == b"2",
                  LEASE_MS / 1000 + 5, "the other front took the queue")
            owner.send_signal(signal.SIGCONT)
            # The woken front knows its lease ran out before it serves the queue again:
            # its client's request is answered by the new owner.
            assert stale.execute_command("EMQ.ADD", stopped, "after") == b"3"
            assert stale.execute_command("EMQ.OWNER", stopped) == \
                f"127.0.0.1:{other.port}".encode()
        with cluster.client() as store:
            assert sorted(store.zrange(f"emq:{{{stopped}}}:pending", 0, -1)) == [b"1", b"2", b"3"]
    finally:
        owner.send_signal(signal.SIGCONT)
        owner.stop()
        other.stop()


def _queue_state(port: int, names: set[bytes]) -> dict[bytes, object]:
    """Each of `names` as the server on `port` holds it: a hash's fields, a sorted set's
    pairs, or None when there is no such key."""
    state: dict[bytes, object] = {}
    with redis.Redis(port=port) as client:
        for name in sorted(names):
            kind = client.type(name)
            if kind == b"hash":
                state[name] = client.hgetall(name)
            elif kind == b"zset":
                state[name] = client.zrange(name, 0, -1, withscores=True)
            else:
                assert kind == b"none", (name, kind)
                state[name] = None
    return state


class Loss:
    """A queue of 12 jobs more (4 leased, 1 completed) through its `owner`, of which the cluster
    then loses what a replica promoted before the last batches reached it would
    (`--cluster-acks 0`): three batches, a job's row and its place in pending, and the
    deletion of a row (`job:gone` comes back)."""

    def __init__(self, cluster: Cluster, owner: ServerProcess, queue: str) -> None:
        ids = [cmd(owner.port, "EMQ.ADD", queue, f"job {i}") for i in range(12)]
        leased = cmd(owner.port, "EMQ.CLAIM", queue, "60000", "COUNT", "4")
        assert isinstance(leased, list) and len(leased) == 4
        job_id, token = leased[0][0], leased[0][1]
        assert cmd(owner.port, "EMQ.COMPLETE", queue, job_id, token) == b"OK"
        self.owner = owner
        self.prefix = prefix = f"emq:{{{queue}}}:".encode()
        self.primary = cluster.primary_of(prefix + b"owner")
        with redis.Redis(port=self.primary.port) as node:
            self.slot = node.execute_command("CLUSTER", "KEYSLOT", prefix + b"owner")
            self.written = int(node.get(prefix + b"written"))
            self.lost = prefix + b"job:" + ids[-1]
            with node.pipeline(transaction=True) as loss:  # one step: a renewal between
                loss.set(prefix + b"written", self.written - 3)  # would write back too soon
                loss.delete(self.lost)
                loss.zrem(prefix + b"pending", ids[-1])
                loss.hset(prefix + b"job:gone", mapping={"state": "completed",
                                                         "payload": "stale"})
                loss.execute()

    def names(self) -> set[bytes]:
        """The queue's keys the cluster holds now, but its bookkeeping."""
        with redis.Redis(port=self.primary.port) as node:
            found = node.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 1000)
        return {name for name in found if name.startswith(self.prefix)} - {
            self.prefix + b"owner", self.prefix + b"written"}

    def written_back(self) -> bool:
        return self.prefix + b"job:gone" not in self.names() and self.lost in self.names()

    def check(self, extra: set[bytes]) -> dict[bytes, object]:
        """The cluster holds what the owner does, key by key; the owner's view."""
        names = self.names() | {self.prefix + b"job:gone"} | extra
        held = _queue_state(self.owner.port, names)  # plain reads: the owner's memory
        assert held == _queue_state(self.primary.port, names)
        assert held[self.prefix + b"job:gone"] is None and held[self.lost] is not None
        return held


def test_batches_the_cluster_lost_are_written_back_from_the_owner_s_memory(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """After the loss the owner's next write finds the gap in the batch numbers, writes
    the whole queue back from memory, and is answered; the cluster then holds what the
    owner does."""
    queue = "written-back"
    cmd(fronts[0].port, "EMQ.ADD", queue, "taken")
    owner, _ = owner_and_other(fronts, queue)
    loss = Loss(cluster, owner, queue)
    added = cmd(owner.port, "EMQ.ADD", queue, "after the loss")
    assert isinstance(added, bytes)
    assert loss.written_back()
    with redis.Redis(port=loss.primary.port) as node:
        assert int(node.get(loss.prefix + b"written")) >= loss.written + 1
    held = loss.check({loss.prefix + b"job:" + added})
    assert held[loss.prefix + b"job:" + added] is not None
    assert len(held[loss.prefix + b"pending"]) == 10  # type: ignore[arg-type]


def test_batches_the_cluster_lost_are_written_back_with_no_write_to_find_them(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """Nobody writes the queue after the loss: the owner's next lease renewal reads the
    cluster's batch number, finds it behind what was acknowledged, and writes the
    queue back within a third of the lease."""
    cmd(fronts[0].port, "EMQ.ADD", "found-idle", "taken")
    loss = Loss(cluster, owner_and_other(fronts, "found-idle")[0], "found-idle")
    until(loss.written_back, LEASE_MS / 1000 + 5, "the queue written back unasked")
    held = loss.check(set())
    assert len(held[loss.prefix + b"pending"]) == 9  # type: ignore[arg-type]


# --- issue 38 ---------------------------------------------------------------------------------
def test_issue_38_verbs_through_a_front_that_does_not_own_the_queue(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """Cancel, snooze, debounce, the trace context, quiet and stop, and the metrics history,
    each run by the queue's owner for a client of the other front, and held by the cluster."""
    peers = name_for(fronts, "peers")
    assert cmd(fronts[0].port, "EMQ.ADD", peers, "first") == b"1"  # a front takes it
    owner, other = owner_and_other(fronts, peers)
    name = f"emqd-worker?host=h&pid=1&queue={peers}&concurrency=1&started=1"
    with redis.Redis(port=other.port) as client:
        run = client.execute_command
        job, token = run("EMQ.CLAIM", peers, 30_000)[:2]
        assert run("EMQ.CANCEL", peers, job, "REASON", "not needed") == b"active"
        with pytest.raises(redis.ResponseError, match="^EMQCANCELLED job was cancelled: not"):
            run("EMQ.EXTEND", peers, job, token, 30_000)
        assert run("EMQ.ADD", peers, "later", "TRACE", "00-ab-cd-01") == b"2"
        assert run("EMQ.CLAIM", peers, 30_000, "WITHTRACE") == [
            b"2", b"1", b"later", 0, b"00-ab-cd-01"]
        assert run("EMQ.REQUEUE", peers, "2", "1", "DELAY", 600_000) == b"OK"
        assert run("EMQ.ADD", peers, "v1", "UNIQUE", "k", "DELAY", 600_000) == [b"3", b"added"]
        assert run("EMQ.ADD", peers, "v2", "UNIQUE", "k", "DELAY", 600_000, "REPLACE",
                   "EXTEND") == [b"3", b"replaced"]
        assert run("EMQ.WORKER", peers, "QUIET", name) == b"OK"
        assert run("EMQ.BEAT", peers, name) == b"quiet"
        assert run("EMQ.METRICS", peers, "FROM", 0, "TO", 0) == []
        stats = run("EMQ.STATS", peers)
        assert (stats[b"cancelled"], stats[b"scheduled"]) == (1, 2)
    assert cmd(other.port, "EMQ.OWNER", peers) == f"127.0.0.1:{owner.port}".encode()
    with cluster.client() as store:
        assert store.hget(f"emq:{{{peers}}}:job:1", "state") == b"cancelled"
        assert store.zscore(f"emq:{{{peers}}}:cancelled", "1") is not None
        assert store.hget(f"emq:{{{peers}}}:job:2", "state") == b"scheduled"
        assert store.hget(f"emq:{{{peers}}}:job:3", "payload") == b"v2"
        assert store.hget(f"emq:{{{peers}}}:workers", name).startswith(b"quiet ")


def all_live(server: ServerProcess, count: int) -> None:
    """Until `server` sees exactly `count` live fronts: one an earlier test stopped stays live
    for its heartbeat's LIVE_MS, and an empty live front is where every new queue goes."""
    until(lambda: fronts_live(server) == count, 15, f"{count} fronts live")


def test_a_queues_history_is_in_the_cluster_and_answers_from_its_next_owner(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """The owner's clean shutdown lets its queue go, closing the minute in progress into the
    cluster first (front.py `release`); the front that takes it next answers EMQ.METRICS
    from what it loads. (The module's two fronts serve the cluster meanwhile.)"""
    all_live(fronts[0], 2)
    started = start_fronts(cluster, 2, "--cluster-lease-ms", "60000")
    try:
        all_live(started[0], 4)
        charted = name_for(started, "charted")
        assert cmd(started[0].port, "EMQ.ADD", charted, "job 0") == b"1"
        owner, other = owner_and_other(started, charted)
        with redis.Redis(port=owner.port) as client:
            for i in range(1, 5):
                client.execute_command("EMQ.ADD", charted, f"job {i}")
            for _ in range(5):
                job, token = client.execute_command("EMQ.CLAIM", charted, 30_000)[:2]
                client.execute_command("EMQ.COMPLETE", charted, job, token)
        owner.stop()  # SIGTERM: the minute is closed, written through, and the lease let go
        with cluster.client() as store:
            assert store.hkeys(f"emq:{{{charted}}}:minutes") == [b"cur"]
        entries = cmd(other.port, "EMQ.METRICS", charted)
        assert sum(entry[b"completed"] for entry in entries) == 5  # type: ignore[union-attr]
        assert cmd(other.port, "EMQ.OWNER", charted) != f"127.0.0.1:{owner.port}".encode()
    finally:
        for server in started:
            server.stop()


def test_the_dashboard_of_a_front_asks_a_worker_wherever_its_queue_is_owned(
        cluster: Cluster, fronts: list[ServerProcess]) -> None:
    """The Workers page's Quiet on a third front: EMQ.WORKER runs at the queue's owner, the
    module's front that took it (or the third, if the new live set hands it over), as a
    client's request to that front would (the router's answer is awaited:
    tests/http/test_actions.py pins that path without a cluster)."""
    all_live(fronts[0], 2)
    paged = name_for(fronts, "paged")
    assert cmd(fronts[0].port, "EMQ.ADD", paged, "x") == b"1"  # before the third front joins
    http_port = free_port()
    viewer = front(cluster, "--http-port", str(http_port))
    try:
        all_live(viewer, 3)
        name = f"emqd-worker?host=h&pid=2&queue={paged}&concurrency=1&started=2"
        web = Web(http_port)
        assert web.get("/workers").status == 200  # the page sets the CSRF cookie its forms repeat
        csrf = next(cookie.value for cookie in web.cookies if cookie.name == CSRF_COOKIE)
        done = web.post("/workers/quiet", {"csrf": csrf or "", "name": name})
        assert done.status == 200 and done.url.endswith("/workers?done=quiet")
        assert cmd(fronts[1].port, "EMQ.BEAT", paged, name) == b"quiet"
        with cluster.client() as store:
            assert store.hget(f"emq:{{{paged}}}:workers", name).startswith(b"quiet ")
    finally:
        viewer.stop()
