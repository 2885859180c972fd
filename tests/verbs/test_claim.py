"""EMQ.CLAIM: the planner directly (order, skips, pause, BLOCK), then over the wire."""

from __future__ import annotations

import socket
import time

import pytest
import redis
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.commit.plan import Block, Plan
from emqd.compat.numbers import MAX_TIME_MS
from emqd.config import Config
from emqd.reply import NULL_ARRAY
from emqd.verbs import add, claim
from tests.support import RawClient, encode_request
from tests.verbs.jobs import (
    P,
    add_jobs,
    check_invariant,
    check_lanes,
    members,
    row,
    run,
    snapshot,
    wire_snapshot,
)
from tests.verbs.planner import (
    NOW,
    RUN_ID,
    build,
    drive,
    effects,
    hash_of,
    keyspace,
    set_field,
)

CORRUPT = "01"
MAX = str(2**63 - 1)


def test_claims_the_front_and_stamps_the_row() -> None:
    space = keyspace()
    add_jobs(space, 2)
    result = drive(claim, ["emq.claim", "q", "5000"], space)
    assert effects(result) == effects(Plan(
        [
            (b"ZREM", P + b"pending", b"1"),
            (b"HSET", P + b"job:1", b"attempts", b"1", b"state", b"active",
             b"lease_epoch", RUN_ID, b"claimed_ms", b"%d" % NOW),
            (b"ZADD", P + b"active", NOW + 5000, b"1"),
        ],
        [b"1", b"1", b"p0", 0],
    ))


def test_token_is_next_attempts_and_failures_are_returned() -> None:
    space = keyspace(**{"emq:{q}:job:x": {"state": "pending", "payload": "y", "attempts": "4",
                                          "failures": "2"},
                        "emq:{q}:pending": [("x", 0)]})
    assert run(claim, ["emq.claim", "q", "10"], space) == [b"x", b"5", b"y", 2]
    assert row(space, "x")[b"attempts"] == b"5"
    check_invariant(space)


def test_order_is_score_then_id_bytes() -> None:
    # Re-entered jobs share score 0: "10" is claimed before "9" (ZPOPMIN order).
    space = keyspace(**{"emq:{q}:pending": [("9", 0), ("10", 0), ("a", 5), ("b", -(2**40))],
                        **{f"emq:{{q}}:job:{i}": {"state": "pending", "payload": i}
                           for i in ("9", "10", "a", "b")}})
    reply = run(claim, ["emq.claim", "q", "10", "COUNT", "10"], space)
    assert [job[0] for job in reply] == [b"b", b"10", b"9", b"a"]


@pytest.mark.parametrize(("argv", "empty"), [([], NULL_ARRAY), (["COUNT", "3"], [])])
def test_nothing_to_claim(argv: list, empty: object) -> None:
    result = drive(claim, ["emq.claim", "q", "10", *argv], keyspace())
    assert effects(result) == effects(Plan([], empty))


def test_count_takes_up_to_n() -> None:
    space = keyspace()
    add_jobs(space, 3)
    assert [j[0] for j in run(claim, ["emq.claim", "q", "10", "COUNT", "2"], space)] == [b"1", b"2"]
    assert [j[0] for j in run(claim, ["emq.claim", "q", "10", "COUNT", "5"], space)] == [b"3"]
    check_invariant(space)


def test_ghosts_are_removed_and_do_not_count() -> None:
    space = keyspace()
    add_jobs(space, 3)
    del space.data[P + b"job:1"]
    del space.data[P + b"job:2"]
    result = drive(claim, ["emq.claim", "q", "10"], space)
    assert result.ops[0] == (b"ZREM", P + b"pending", b"1", b"2", b"3")
    assert result.reply[0] == b"3"
    space.apply(result.ops)
    assert members(space, b"pending") == []
    check_invariant(space)


def test_skipped_writes_are_made_even_when_nothing_is_claimed() -> None:
    space = keyspace(**{"emq:{q}:pending": [("g", 1)]})
    assert effects(drive(claim, ["emq.claim", "q", "10"], space)) == effects(Plan(
        [(b"ZREM", P + b"pending", b"g")], NULL_ARRAY))
    blocked = drive(claim, ["emq.claim", "q", "10", "BLOCK", "0"], space)
    assert isinstance(blocked, Block)
    assert (blocked.keys, blocked.timeout_ms, blocked.timeout_reply) == (
        (P + b"pending", P + b"ring", P + b"meta"), 0, NULL_ARRAY)
    assert effects(blocked.plan) == effects(Plan([(b"ZREM", P + b"pending", b"g")], None))


def test_many_ghosts_in_front_are_read_through() -> None:
    # Each round reads the front deeper (doubling), so hundreds of ghosts cost a few rounds.
    space = keyspace(**{"emq:{q}:pending": [(f"g{i:03}", -1) for i in range(300)],
                        "emq:{q}:job:a": {"state": "pending"},
                        "emq:{q}:job:b": {"state": "pending"}})
    space.apply([(b"ZADD", P + b"pending", 1, b"a", 2, b"b")])
    reply = run(claim, ["emq.claim", "q", "10", "COUNT", "2"], space)
    assert [j[0] for j in reply] == [b"a", b"b"]
    assert members(space, b"pending") == []
    check_invariant(space)


# --- bounded calls (protocol section 4) ------------------------------------------------
def test_count_over_the_cap_is_clamped_not_refused() -> None:
    space = keyspace()
    add_jobs(space, claim.MAX_COUNT + 5)
    reply = run(claim, ["emq.claim", "q", "10", "COUNT", claim.MAX_COUNT * 50], space)
    assert len(reply) == claim.MAX_COUNT
    assert len(members(space, b"pending")) == 5
    check_invariant(space)


def ghosts_then_one_job(space_extra: int) -> object:
    """MAX_SKIPPED + space_extra ghosts at the front of pending, then job `j`."""
    ghosts = claim.MAX_SKIPPED + space_extra
    space = keyspace(**{"emq:{q}:pending": [(f"g{i:05}", -1) for i in range(ghosts)],
                        "emq:{q}:job:j": {"state": "pending", "payload": "x"}})
    space.apply([(b"ZADD", P + b"pending", 1, b"j")])
    return space


@pytest.mark.parametrize("block", [[], ["BLOCK", "0"]])
def test_a_walk_stops_after_max_skipped_and_the_next_call_goes_on(block: list) -> None:
    space = ghosts_then_one_job(500)
    result = drive(claim, ["emq.claim", "q", "10", *block], space)
    # cut off: answered at once, even with BLOCK (no park), having removed what it skipped
    assert isinstance(result, Plan) and result.reply is NULL_ARRAY
    skipped = [b"g%05d" % i for i in range(claim.MAX_SKIPPED)]
    assert result.ops == [(b"ZREM", P + b"pending", *skipped)]
    space.apply(result.ops)
    assert len(members(space, b"pending")) == 501
    assert run(claim, ["emq.claim", "q", "10", *block], space)[0] == b"j"
    assert members(space, b"pending") == []
    check_invariant(space)


def test_jobs_found_before_the_cut_off_are_handed_out() -> None:
    space = ghosts_then_one_job(10)
    space.apply([(b"HSET", P + b"job:a", b"state", b"pending", b"payload", b"a"),
                 (b"ZADD", P + b"pending", -2, b"a")])
    reply = run(claim, ["emq.claim", "q", "10", "COUNT", "5", "BLOCK", "0"], space)
    assert [job[0] for job in reply] == [b"a"]
    assert len(members(space, b"pending")) == 11  # 10 ghosts and j wait for the next call


def test_corrupt_rows_count_as_skipped() -> None:
    space = keyspace()
    ids = add_jobs(space, claim.MAX_SKIPPED + 1)
    for job_id in ids[:-1]:
        set_field(space, P + b"job:" + job_id, b"attempts", b"x")
    assert run(claim, ["emq.claim", "q", "10"], space) is NULL_ARRAY
    assert len(members(space, b"dead")) == claim.MAX_SKIPPED
    assert run(claim, ["emq.claim", "q", "10"], space)[0] == ids[-1]
    check_invariant(space)


def test_a_lane_full_of_ghosts_is_walked_in_bounded_calls() -> None:
    space = keyspace()
    ids = [run(add, ["emq.add", "q", "x", "GROUP", "g"], space)
           for _ in range(claim.MAX_SKIPPED + 3)]
    space.apply([(b"DEL", *(P + b"job:" + i for i in ids[:-1]))])
    assert run(claim, ["emq.claim", "q", "10", "BLOCK", "0"], space) is NULL_ARRAY
    assert len(members(space, b"lane:g")) == 3
    check_lanes(space)  # the lane's bookkeeping is exact after the cut-off too
    assert run(claim, ["emq.claim", "q", "10"], space)[0] == ids[-1]
    check_invariant(space)
    check_lanes(space)


def test_stale_ring_members_count_as_skipped() -> None:
    space = keyspace()
    for i in range(claim.MAX_SKIPPED + 2):
        run(add, ["emq.add", "q", "x", "GROUP", f"g{i:05}"], space)
    last = f"g{claim.MAX_SKIPPED + 1:05}".encode()
    # a client deletes every lane but the last behind the ring's back
    space.apply([(b"DEL", *(key for key in list(space.data)
                            if key.startswith(P + b"lane:") and not key.endswith(last)))])
    assert run(claim, ["emq.claim", "q", "10"], space) is NULL_ARRAY  # cut off
    assert len(members(space, b"ring")) == 2  # one stale member left, and the last lane
    assert run(claim, ["emq.claim", "q", "10"], space) is not NULL_ARRAY
    assert members(space, b"ring") == []


@pytest.mark.parametrize(
    ("field", "value", "text"),
    [
        ("attempts", CORRUPT, errors.HASH_NOT_INTEGER.message),
        ("attempts", "1 ", errors.HASH_NOT_INTEGER.message),
        ("attempts", MAX, errors.OVERFLOW.message),
        ("failures", "+1", errors.HASH_NOT_INTEGER.message),
    ],
)
def test_corrupt_counter_is_dead_lettered_and_the_claim_goes_on(
        field: str, value: str, text: bytes) -> None:
    space = keyspace()
    add_jobs(space, 2)
    set_field(space, P + b"job:1", field.encode(), value.encode())
    reply = run(claim, ["emq.claim", "q", "10"], space)
    assert reply[0] == b"2"
    bad = row(space, "1")
    assert (bad[b"state"], bad[b"last_error"], bad[b"finished_ms"]) == (
        b"dead", text, b"%d" % NOW)
    assert bad[field.encode()] == value.encode()  # the counter itself is left as it was
    assert members(space, b"dead") == [(b"1", NOW)]
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"1"}
    check_invariant(space)


def test_corrupt_row_dead_letter_is_trimmed_by_keep_dead() -> None:
    space = keyspace(**{"emq:{q}:config": {"keep_dead": "1"},
                        "emq:{q}:dead": [("old", 5)], "emq:{q}:job:old": {"state": "dead"}})
    add_jobs(space, 1)
    set_field(space, P + b"job:1", b"attempts", b"x")
    assert run(claim, ["emq.claim", "q", "10"], space) is NULL_ARRAY
    assert members(space, b"dead") == [(b"1", NOW)]
    assert row(space, "old") is None
    assert hash_of(space, P + b"metrics:failed") == {b"count": b"1", b"trimmed": b"1"}


def test_paused_queue_claims_nothing_and_blocks_on_meta() -> None:
    space = keyspace(**{"emq:{q}:meta": {"paused": "1"}})
    add_jobs(space, 1)
    assert effects(drive(claim, ["emq.claim", "q", "10"], space)) == effects(Plan([], NULL_ARRAY))
    assert drive(claim, ["emq.claim", "q", "10", "COUNT", "1", "BLOCK", "20"], space) == Block(
        (P + b"pending", P + b"ring", P + b"meta"), 20, [], None)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["q", "0"], errors.must_be_positive("LEASE_MS")),
        (["q", "-5"], errors.must_be_positive("LEASE_MS")),
        (["q", "01"], errors.must_be_positive("LEASE_MS")),
        (["q", "10", "COUNT", "0"], errors.must_be_positive("COUNT")),
        (["q", "10", "BLOCK", "-1"], errors.must_be_non_negative("BLOCK")),
        (["q", "10", "BLOCK", "1.5"], errors.must_be_non_negative("BLOCK")),
        (["q", "10", "COUNT"], errors.SYNTAX),
        (["q", "10", "COUNT", "1", "COUNT", "2"], errors.SYNTAX),
        (["q", "10", "WAIT", "1"], errors.SYNTAX),
        (["q{", "10"], errors.INVALID_QUEUE),
    ],
)
def test_refusals(argv: list, error: errors.ReplyError) -> None:
    space = keyspace()
    add_jobs(space, 1)
    before = snapshot(space)
    assert drive(claim, ["emq.claim", *argv], space) == error
    assert snapshot(space) == before


@pytest.mark.parametrize("key", ["emq:{q}:pending", "emq:{q}:active", "emq:{q}:job:1",
                                 "emq:{q}:meta"])
def test_wrongtype_refuses_the_whole_call(key: str) -> None:
    space = keyspace()
    add_jobs(space, 1)
    space.data[key.encode()] = keyspace(**{"x": {"a": "b"} if key.endswith(("pending", "active"))
                                           else [("a", 1)]}).data[b"x"]
    assert drive(claim, ["emq.claim", "q", "10"], space) == errors.WRONGTYPE


# --- over the wire ------------------------------------------------------------------
def test_claim_over_the_wire(r: redis.Redis) -> None:
    assert r.execute_command("EMQ.CLAIM", "q", "1000") is None
    assert r.execute_command("EMQ.CLAIM", "q", "1000", "COUNT", "2") == []
    r.execute_command("EMQ.ADD", "q", "a")
    r.execute_command("EMQ.ADD", "q", "b")
    assert r.execute_command("emq.claim", "q", "1000") == [b"1", b"1", b"a", 0]
    assert r.execute_command("EMQ.CLAIM", "q", "1000", "COUNT", "5") == [[b"2", b"1", b"b", 0]]
    assert r.hget("emq:{q}:job:2", "state") == b"active"
    assert r.type("emq:{q}:pending") == b"none"


def test_a_huge_count_is_clamped_over_the_wire(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for _ in range(claim.MAX_COUNT + 10):
        pipe.execute_command("EMQ.ADD", "q", "x")
    pipe.execute()
    assert len(r.execute_command("EMQ.CLAIM", "q", "1000", "COUNT", "200000")) == claim.MAX_COUNT
    assert len(r.execute_command("EMQ.CLAIM", "q", "1000", "COUNT", "200000", "BLOCK", "0")) == 10


def test_nil_is_resp2_null_array(raw: RawClient) -> None:
    assert raw.command("EMQ.CLAIM", "q", "10") == b"*-1\r\n"
    assert raw.command("EMQ.CLAIM", "q", "10", "BLOCK", "1") == b"*-1\r\n"
    assert raw.command("EMQ.CLAIM", "q", "10", "COUNT", "1", "BLOCK", "1") == b"*0\r\n"
    raw.command("HELLO", "3")
    assert raw.command("EMQ.CLAIM", "q", "10") == b"_\r\n"


def test_block_times_out_with_nil(raw: RawClient) -> None:
    start = time.monotonic()
    assert raw.command("EMQ.CLAIM", "q", "10", "BLOCK", "60") == b"*-1\r\n"
    assert time.monotonic() - start >= 0.05


def _job(job_id: str, token: str, payload: str, failures: int = 0) -> bytes:
    """A claimed job's reply bytes (RESP2)."""
    parts = [b"$%d\r\n%s\r\n" % (len(x), x.encode()) for x in (job_id, token, payload)]
    return b"*4\r\n" + b"".join(parts) + b":%d\r\n" % failures


def _parked(port: int, *argv: object) -> RawClient:
    """A client whose blocking request the server has read (and parked) already."""
    client = RawClient(port)
    client.send(encode_request(*argv))
    # The request reached the server's socket before this round trip starts, and the
    # loop serves ready sockets in the order they became ready; the short sleep is a
    # margin on top, not the mechanism.
    control = RawClient(port)
    try:
        assert control.command("PING") == b"+PONG\r\n"
    finally:
        control.close()
    time.sleep(0.01)
    return client


def _nothing_yet(client: RawClient) -> bool:
    client.sock.settimeout(0.1)
    try:
        return client.sock.recv(1, socket.MSG_PEEK) == b""
    except TimeoutError:
        return True
    finally:
        client.sock.settimeout(5.0)


def test_parked_clients_are_served_first_come_first_served(emqd_port: int, raw: RawClient) -> None:
    first = _parked(emqd_port, "EMQ.CLAIM", "q", "1000", "COUNT", "2", "BLOCK", "0")
    second = _parked(emqd_port, "EMQ.CLAIM", "q", "1000", "BLOCK", "5000")
    third = _parked(emqd_port, "EMQ.CLAIM", "q", "1000", "BLOCK", "5000")
    try:
        assert _nothing_yet(first) and _nothing_yet(second)
        raw.send(b"".join(encode_request(*c) for c in (
            ("MULTI",), ("EMQ.ADD", "q", "a"), ("EMQ.ADD", "q", "b"), ("EMQ.ADD", "q", "c"),
            ("EXEC",))))
        for _ in range(5):
            raw.read_reply()
        assert first.read_reply() == b"*2\r\n" + _job("1", "1", "a") + _job("2", "1", "b")
        assert second.read_reply() == _job("3", "1", "c")
        assert _nothing_yet(third)
        raw.command("EMQ.ADD", "q", "d")
        assert third.read_reply() == _job("4", "1", "d")
    finally:
        for client in (first, second, third):
            client.close()


def test_a_parked_client_that_disconnects_claims_nothing(emqd_port: int, r: redis.Redis) -> None:
    gone = _parked(emqd_port, "EMQ.CLAIM", "q", "1000", "BLOCK", "0")
    gone.close()
    time.sleep(0.05)
    r.execute_command("EMQ.ADD", "q", "a")
    assert r.hget("emq:{q}:job:1", "state") == b"pending"
    assert r.execute_command("EMQ.CLAIM", "q", "1000") == [b"1", b"1", b"a", 0]


def test_pipelined_commands_wait_for_the_parked_claim(emqd_port: int, r: redis.Redis) -> None:
    client = RawClient(emqd_port)
    try:
        client.send(encode_request("EMQ.CLAIM", "q", "1000", "BLOCK", "0")
                    + encode_request("PING"))
        assert _nothing_yet(client)
        r.execute_command("EMQ.ADD", "q", "a")
        assert client.read_reply() == _job("1", "1", "a")
        assert client.read_reply() == b"+PONG\r\n"
    finally:
        client.close()


def test_resume_wakes_a_parked_claimer(emqd_port: int, r: redis.Redis) -> None:
    r.execute_command("EMQ.PAUSE", "q")
    r.execute_command("EMQ.ADD", "q", "a")
    client = _parked(emqd_port, "EMQ.CLAIM", "q", "1000", "BLOCK", "0")
    try:
        assert _nothing_yet(client)
        r.execute_command("EMQ.RESUME", "q")  # its write to meta wakes the parked claimer
        assert client.read_reply() == _job("1", "1", "a")
    finally:
        client.close()


def test_block_is_ignored_inside_multi(raw: RawClient) -> None:
    raw.command("MULTI")
    assert raw.command("EMQ.CLAIM", "q", "10", "BLOCK", "0") == b"+QUEUED\r\n"
    assert raw.command("EMQ.CLAIM", "q", "10", "COUNT", "2", "BLOCK", "0") == b"+QUEUED\r\n"
    assert raw.command("EXEC") == b"*2\r\n*-1\r\n*0\r\n"


def test_refusal_over_the_wire_writes_nothing(r: redis.Redis) -> None:
    r.execute_command("EMQ.ADD", "q", "a")
    r.hset("emq:{q}:job:1", "attempts", "x")
    r.hset("emq:{q}:job:2", mapping={"state": "pending"})
    r.hset("emq:{q}:job:3", mapping={"state": "pending"})
    r.execute_command("EMQ.ADD", "q", "b", "ID", "2")  # row 2 exists: nothing added
    before = wire_snapshot(r)
    with pytest.raises(redis.ResponseError, match="LEASE_MS must be a positive integer"):
        r.execute_command("EMQ.CLAIM", "q", "0")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("EMQ.CLAIM", "q", "10", "COUNT")
    r.hset("emq:{q}:active", "not", "a zset")
    before = wire_snapshot(r)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("EMQ.CLAIM", "q", "10")
    assert wire_snapshot(r) == before



# --- issue 25, item 7: a claim's wait counts from when the job could be claimed -------------
@pytest.mark.parametrize(("fields", "wait"), [
    ({"created_ms": str(NOW - 5000)}, 5000),  # added, claimable at once
    ({"created_ms": str(NOW - 5000), "ready_ms": str(NOW - 100)}, 100),  # due, or back, then
])
def test_the_claimed_events_wait_counts_from_when_the_job_became_claimable(
        fields: dict, wait: int) -> None:
    """A delayed job claimed 100 ms after its due time waited 100 ms, not the 5 s since it
    was added: emqd_job_wait_seconds (and an alert on it) used to count from creation."""
    space = keyspace(**{"emq:{q}:job:1": {"state": "pending", "payload": "p", **fields},
                        "emq:{q}:pending": [("1", 1)]})
    plan = drive(claim, ["emq.claim", "q", "5000"], space)
    [(name, _, _, _, extra)] = plan.events
    assert (name, extra["wait_ms"]) == ("claimed", wait)


def test_a_promoted_job_is_ready_from_its_due_time(emqd_port: int) -> None:
    """Over the wire: ADD with DELAY, promoted by the server on time, then claimed: its
    wait is from the due time (the row's `ready_ms`), a few ms, not the delay."""
    r = redis.Redis(port=emqd_port)
    job_id = r.execute_command("EMQ.ADD", "due", "x", "DELAY", 300)
    pubsub = r.pubsub()
    pubsub.subscribe("emq:{due}:events")
    deadline = time.monotonic() + 5
    while r.hget(b"emq:{due}:job:" + job_id, "state") != b"pending":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    created, ready = (int(v) for v in r.hmget(b"emq:{due}:job:" + job_id, "created_ms",
                                               "ready_ms"))
    assert ready - created >= 300
    r.execute_command("EMQ.CLAIM", "due", 5000)
    claimed = None
    while claimed is None and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
        if message and message["type"] == "message" and b'"claimed"' in message["data"]:
            claimed = message["data"]
    assert claimed is not None
    wait_ms = int(claimed.rsplit(b'"wait_ms":', 1)[1].rstrip(b"}"))
    assert wait_ms < 300  # counted from the due time
    pubsub.close()
    r.close()


# --- issue 25, item 8: which connection holds a lease, for the dashboard's Workers page ----
def test_a_named_connection_is_stamped_as_the_holder_and_an_unnamed_one_pays_nothing(
        emqd_port: int) -> None:
    """CLAIM (the one-job template, a lane's, the general path) and EXTEND from a connection
    with a name write its CLIENT ID as `holder`; from one without, no field at all."""
    named, plain = redis.Redis(port=emqd_port), redis.Redis(port=emqd_port)
    named.client_setname("emqd-worker?host=h&pid=1")
    me = named.client_id()
    for n in range(4):
        plain.execute_command("EMQ.ADD", "held", f"p{n}", *(["GROUP", "g"] if n == 3 else []))
    flat = named.execute_command("EMQ.CLAIM", "held", 5000)  # the template
    two = named.execute_command("EMQ.CLAIM", "held", 5000, "COUNT", 2)  # the general path
    lane = named.execute_command("EMQ.CLAIM", "held", 5000)  # the lane's template
    for job_id in (flat[0], two[0][0], two[1][0], lane[0]):
        assert named.hget(b"emq:{held}:job:" + job_id, "holder") == b"%d" % me, job_id
    plain.execute_command("EMQ.ADD", "held", "unnamed")
    [job_id, token, _, _] = plain.execute_command("EMQ.CLAIM", "held", 5000)
    assert plain.hget(b"emq:{held}:job:" + job_id, "holder") is None
    named.execute_command("EMQ.EXTEND", "held", job_id, token, 5000)
    assert plain.hget(b"emq:{held}:job:" + job_id, "holder") == b"%d" % me  # re-stamped
    named.close()
    plain.close()


# --- the ONE Shapes against the general path they stand for ---------------------------
_COUNTERS = st.none() | st.integers(-(2**20), 2**63 - 2)  # absent, or HINCRBY's any value
_STAMPS = st.none() | st.integers(0, 2**50).map(str) | st.binary(max_size=6)  # or junk


@settings(max_examples=200, deadline=None, database=None)
@given(job_id=st.binary(min_size=1, max_size=6), attempts=_COUNTERS,
       failures=_COUNTERS.filter(lambda n: n is None or n >= -(2**20)),
       payload=st.binary(max_size=24), trace=st.none() | st.binary(max_size=12),
       ready=_STAMPS, created=_STAMPS, floor=st.none() | st.integers(0, 2**63 - 1),
       behind=st.integers(0, 3), count=st.none() | st.integers(1, 5),
       holder=st.sampled_from([b"", b"7", b"123456"]), with_trace=st.booleans(),
       active=st.integers(0, 2), lease=st.integers(1, 2**40), now=st.integers(0, 2**52))
def test_the_one_shapes_plan_what_the_general_path_plans(
        job_id: bytes, attempts: int | None, failures: int | None, payload: bytes,
        trace: bytes | None, ready: str | bytes | None, created: str | bytes | None,
        floor: int | None, behind: int, count: int | None, holder: bytes, with_trace: bool,
        active: int, lease: int, now: int) -> None:
    """CLAIM of a flat queue whose front member is a claimable row, nothing skipped, no
    rate limit (claim._one, the ONE and ONE_HELD Shapes) against claim.general given that
    walk, on the same keyspace: the same ops as the log holds them, reply, events and due.
    The row's counters at any value HINCRBY takes (or absent, the floor's write when the
    token rises above `meta.token_floor`), its wait stamps numbers, junk or absent, with
    and without a holder, COUNT and WITHTRACE; members behind the front (ghosts here) only
    when one job is wanted, as a COUNT above one would walk on to them."""
    assume(now + lease <= MAX_TIME_MS)
    if count is not None and count > 1:
        behind = 0  # the walk would go on past the front: the general path's alone
    fields: dict[str, object] = {"state": "pending", "payload": payload}
    for name, value in (("attempts", attempts), ("failures", failures), ("trace", trace),
                        ("ready_ms", ready), ("created_ms", created)):
        if value is not None:
            fields[name] = value
    data: dict[bytes, object] = {
        P + b"job:" + job_id: fields,
        P + b"pending": [(job_id, 5), *((b"ghost%d" % i, 6 + i) for i in range(behind))],
        P + b"meta": {"seq": 9, **({} if floor is None else {"token_floor": floor})},
    }
    if active:
        data[P + b"active"] = [(b"held%d" % i, NOW + i) for i in range(active)]
    space = build(data)
    argv = [b"emq.claim", b"q", b"%d" % lease]
    argv += ([] if count is None else [b"COUNT", b"%d" % count])
    argv += [b"WITHTRACE"] if with_trace else []
    args = claim.with_holder(claim.parse(argv, Config()), holder)
    fast = claim.plan(args, space, now, RUN_ID)
    row = space.hash(P + b"job:" + job_id)
    assert row is not None
    token = claim.judge(row)
    assert isinstance(token, int)  # the front is claimable: the walk takes it alone
    floor_rises = token > 1 and token > (floor or 0)
    assert isinstance(fast, Plan)
    assert fast.shape is (None if floor_rises else claim.ONE_HELD if holder else claim.ONE)
    general = claim.general(args, space, ([job_id], [(job_id, row, token)], []), None, now,
                            RUN_ID)
    assert effects(fast) == effects(general)
    assert (fast.events, fast.due) == (general.events, general.due)
