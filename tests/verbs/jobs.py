"""Helpers for the job-verb tests: drive a verb and apply it, read sets, check the invariant."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from emqd.commit.plan import Block, Plan
from emqd.errors import ReplyError
from emqd.store import hash as hashes
from emqd.store.keyspace import Keyspace
from emqd.verbs import add, claim, promote, stalled_check
from tests.verbs.planner import NOW, RUN_ID, drive, hash_of, keyspace

P = b"emq:{q}:"
SETS = (b"pending", b"active", b"scheduled", b"dead", b"completed", b"waiting",
        b"cancelled")


def run(verb: ModuleType, argv: list[Any], space: Keyspace, now: int = NOW,
        run_id: bytes = RUN_ID, **kw: Any) -> Any:
    """Drive and apply (a Plan, or a Block's plan); the reply, or the ReplyError."""
    result = drive(verb, argv, space, now=now, run_id=run_id, **kw)
    if isinstance(result, ReplyError):
        return result
    if isinstance(result, Block):
        if result.plan is not None:
            space.apply(result.plan.ops)
        return result
    assert isinstance(result, Plan), result
    space.apply(result.ops)
    return result.reply


def add_jobs(space: Keyspace, n: int, *options: Any, queue: str = "q", now: int = NOW) -> list:
    return [run(add, ["emq.add", queue, f"p{i}", *options], space, now=now) for i in range(n)]


def claim_one(space: Keyspace, lease: int = 1000, now: int = NOW, run_id: bytes = RUN_ID) -> list:
    reply = run(claim, ["emq.claim", "q", lease], space, now=now, run_id=run_id)
    assert isinstance(reply, list), reply
    return reply


def row(space: Keyspace, job_id: bytes | str, prefix: bytes = P) -> dict | None:
    jid = job_id if isinstance(job_id, bytes) else job_id.encode()
    return hash_of(space, prefix + b"job:" + jid)


def members(space: Keyspace, name: bytes, prefix: bytes = P) -> list[tuple[bytes, float]]:
    zset = space.zset(prefix + name)
    return [] if zset is None else [(m, s) for s, m in zset]


def sets_holding(space: Keyspace, job_id: bytes, prefix: bytes = P) -> list[bytes]:
    return [name for name in SETS if job_id in (space.zset(prefix + name) or ())]


def check_invariant(space: Keyspace, prefix: bytes = P) -> None:
    """Section 1: every job in exactly the one set its `state` names (a waiting lane job:
    its lane, `lane:<group>`, and no other lane); no member without a row; no job log
    without its row, nor longer than `keep_log_lines`."""
    keep = int((hash_of(space, prefix + b"config") or {}).get(b"keep_log_lines", 100))
    for key in space.data:
        if key.startswith(prefix + b"log:"):
            assert row(space, key[len(prefix) + 4:], prefix) is not None, key
            assert len(space.zset(key) or ()) <= keep, key
    lanes = [key for key in space.data if key.startswith(prefix + b"lane:")]
    for key in space.data:
        if key.startswith(prefix + b"job:"):
            job_id = key[len(prefix) + 4:]
            value = hash_of(space, key)
            assert value is not None
            state = value[b"state"]
            group = value.get(b"group")
            held = sets_holding(space, job_id, prefix)
            held += [lane[len(prefix):] for lane in lanes if job_id in (space.zset(lane) or ())]
            if group and state == b"pending":
                state = b"lane:" + group
            assert held == [state], (job_id, value, held)
    for name in (*SETS, *(lane[len(prefix):] for lane in lanes)):
        for member, _ in members(space, name, prefix):
            assert row(space, member, prefix) is not None, (name, member)


def check_flows(space: Keyspace) -> None:
    """Flows' bookkeeping (emqd/rules/flows.py), recomputed from the rows, in every queue.

    A parent that has not run (it has `children_left`) counts exactly its children that
    are not settled (a row that is not completed, nor dead or cancelled under `ignore`)
    and, unless its policy is `ignore`, its dead (and cancelled) children; it is dead when
    one is dead, else waiting (with something left). A child of such a parent is in its
    record. (For this to be exact no dead child's row may have been trimmed: the worlds
    keep them.)
    """
    for key in list(space.data):
        if b"}:job:" not in key:
            continue
        parent = hash_of(space, key)
        assert parent is not None
        if b"parent" in parent:
            owner = hash_of(space, parent[b"parent"])
            if owner is not None and b"children_left" in owner:
                queue, _, job_id = parent[b"parent"].partition(b"}:job:")
                record = space.zset(queue + b"}:children:" + job_id)
                assert record is not None and key in record, (key, parent)
        if b"children_left" not in parent:
            assert parent.get(b"state") != b"waiting", (key, parent)
            continue
        queue, _, job_id = key.partition(b"}:job:")
        policy = parent.get(b"on_child_fail", b"fail")
        left = dead = 0
        for _, child_key in space.zset(queue + b"}:children:" + job_id) or ():
            child = hash_of(space, child_key)
            if child is None or child.get(b"parent") != key:
                continue
            state = child[b"state"]
            ended = state in (b"dead", b"cancelled")  # a cancelled child counts as a dead one
            if ended and policy != b"ignore":
                dead += 1
            if state != b"completed" and not (ended and policy == b"ignore"):
                left += 1
        assert int(parent[b"children_left"]) == left, (key, parent, left)
        assert int(parent.get(b"children_dead", b"0")) == dead, (key, parent, dead)
        assert parent[b"state"] == (b"dead" if dead else b"waiting"), (key, parent)
        assert left > 0, (key, parent)


LIVE = (b"pending", b"scheduled", b"active", b"waiting")


def check_unique(space: Keyspace, now: int, prefix: bytes = P) -> None:
    """Unique keys (emqd/rules/unique.py): a key held without TTL is held by a live job that
    names it; a live job holding its key (no TTL) is the one the table names, unless it was
    revived while another held it; at most one live holder a key."""
    table = hash_of(space, prefix + b"unique") or {}
    ttl = {m: s for m, s in members(space, b"unique:ttl", prefix)}
    for key, owner in table.items():
        if key in ttl:
            continue  # held until its time, whatever its job does
        held = row(space, owner, prefix)
        assert held is not None and held[b"state"] in LIVE and held.get(b"unique") == key, (
            key, owner, held)
    holders: dict[bytes, list[bytes]] = {}
    for key in space.data:
        if key.startswith(prefix + b"job:"):
            job = hash_of(space, key) or {}
            if b"unique" in job and b"unique_until" not in job and job[b"state"] in LIVE:
                holders.setdefault(job[b"unique"], []).append(key[len(prefix) + 4:])
    for key, ids in holders.items():
        assert table.get(key) in ids, (key, ids, table)


def rate_window(space: Keyspace, now: int, prefix: bytes = P) -> tuple[int, int] | None:
    """(claims in the queue's rate window at `now`, its MAX), None without a limit."""
    meta = hash_of(space, prefix + b"meta") or {}
    if b"rate_max" not in meta:
        return None
    most, per = int(meta[b"rate_max"]), int(meta[b"rate_per_ms"])
    return sum(1 for _, at in members(space, b"rate:claims", prefix) if at > now - per), most


def check_claim_rate(before: tuple[int, int] | None, after: tuple[int, int] | None) -> None:
    """A CLAIM under a rate limit (emqd/rules/rates.py) adds no more claims to the window
    than MAX allows (a window over MAX, after the limit was lowered, takes none)."""
    if before is None or after is None:
        return
    (inside, most), (now_inside, _) = before, after
    assert now_inside <= max(most, inside), (inside, now_inside, most)
    assert inside < most or now_inside == inside, (inside, now_inside, most)


def snapshot(space: Keyspace) -> dict:
    """A deep copy of the keyspace as plain data, to compare before / after."""
    return {k: (list(space.zset(k) or ()) if space.type_name(k) == "zset"
                else hashes.as_dict(v))  # type: ignore[arg-type]
            for k, v in space.data.items()}


QUEUE_KEYS = (b"pending", b"active", b"scheduled", b"dead", b"completed", b"meta", b"config",
              b"metrics:failed", b"metrics:completed")


def wire_snapshot(client: Any, ids: tuple = ("1", "2", "3", "4", "5"), prefix: bytes = P) -> dict:
    """Everything a client can see of queue `q`'s keys (and the key count), to compare
    before / after a refused call: hashes by HGETALL, sorted sets by ZRANGE WITHSCORES."""
    keys = [prefix + name for name in QUEUE_KEYS] + [prefix + b"job:" + i.encode() for i in ids]
    seen: dict = {b"dbsize": client.dbsize()}
    for key in keys:
        kind = client.type(key)
        if kind == b"hash":
            seen[key] = (kind, client.hgetall(key))
        elif kind == b"zset":
            seen[key] = (kind, client.zrange(key, 0, -1, withscores=True))
        else:
            seen[key] = (kind, None)
    return seen


def wire_error(client: Any, *argv: Any) -> str:
    """The exact error text a command answers (redis-py keeps the code in the message)."""
    import redis

    try:
        reply = client.execute_command(*argv)
    except redis.ResponseError as error:
        return str(error)
    raise AssertionError(f"{argv!r} answered {reply!r}, not an error")


def check_lanes(space: Keyspace, default_limit: int = 1, prefix: bytes = P,
                now: int | None = None) -> None:
    """Section 8's bookkeeping, recomputed from the rows and sets (see emqd/rules/lanes.py).

    With `now`, a lane whose rate window is full at `now` is not servable and waits in
    `rated` (emqd/rules/rates.py).

    `gactive` equals the real count of active lane jobs (no field at 0); `lanes_pending`
    equals the lanes' total size; the ring holds exactly the servable members: each
    lane with waiting jobs and a free slot, and "" when pending is not empty and at
    least one lane is servable; its scores are distinct and none is above `meta.rr`.
    """
    active: dict[bytes, int] = {}
    for key in space.data:
        value = hash_of(space, key) if key.startswith(prefix + b"job:") else None
        if value is not None and value.get(b"group"):
            if value[b"state"] == b"active":
                active[value[b"group"]] = active.get(value[b"group"], 0) + 1
    assert (hash_of(space, prefix + b"gactive") or {}) == {g: b"%d" % n for g, n in active.items()}
    lanes = {key[len(prefix) + 5:]: len(space.zset(key) or ()) for key in space.data
             if key.startswith(prefix + b"lane:")}
    meta = hash_of(space, prefix + b"meta") or {}
    assert int(meta.get(b"lanes_pending", 0)) == sum(lanes.values())
    limits = hash_of(space, prefix + b"glimit") or {}
    queue_limit = int((hash_of(space, prefix + b"config") or {}).get(b"lane_limit", default_limit))
    rates = hash_of(space, prefix + b"grate") or {}
    rated = {m: at for m, at in members(space, b"rated", prefix)}
    servable = set()
    releasing = set()  # due in `rated`: housekeeping puts them back, they may be in or out
    for group, size in lanes.items():
        limit = int(limits.get(group, queue_limit))
        if size and (limit == 0 or active.get(group, 0) < limit):
            if now is not None and rated.get(group, now + 1) <= now:
                releasing.add(group)
                continue
            if group in rates and now is not None:
                most, per = map(int, rates[group].split(b":"))
                window = members(space, b"rate:lane:" + group, prefix)
                if sum(1 for _, at in window if at > now - per) >= most:
                    assert group in rated, (group, window)  # it waits for room
                    continue
            servable.add(group)
    ring = members(space, b"ring", prefix)
    in_ring = {m for m, _ in ring} - {b""}
    assert in_ring - releasing == servable, (ring, servable, releasing)
    flat = bool(in_ring) and bool(space.zset(prefix + b"pending"))
    assert (b"" in {m for m, _ in ring}) == flat, (ring, flat)
    scores = [score for _, score in ring]
    assert len(set(scores)) == len(scores)
    assert all(score <= int(meta.get(b"rr", 0)) for score in scores)


def step_checked(verb: ModuleType, argv: list[Any], space: Keyspace, now: int = NOW,
                 run_id: bytes = RUN_ID) -> Any:
    """One step of a random interleaving: drive and apply (a Block's plan too); the reply,
    the ReplyError (after asserting the refusal wrote nothing), a Block's timeout reply, or
    a read's reply."""
    before = snapshot(space)
    result = drive(verb, argv, space, now=now, run_id=run_id)
    if isinstance(result, ReplyError):
        assert snapshot(space) == before, (argv, result)  # a refusal writes nothing
        return result
    if isinstance(result, Block):
        if result.plan is not None:
            space.apply(result.plan.ops)
        return result.timeout_reply
    if not isinstance(result, Plan):
        return result  # a read (EMQ.WAIT, EMQ.LOGS): a reply, no plan
    space.apply(result.ops)
    return result.reply


class Interleaving:
    """What both random-interleaving models share: one keyspace (retention and backoff
    set low so they happen), a controlled clock and run_id (a "restart" draws a new one),
    the ids added, and the steps that need no job in hand."""

    def __init__(self) -> None:
        self.space = keyspace(**{"emq:{q}:config": {"keep_completed": "3", "keep_dead": "2",
                                                    "backoff": "exp:5:40",
                                                    "keep_log_lines": "2",
                                                    "keep_completed_ms": "60"}})
        self.now = NOW
        self.run_id = RUN_ID
        self.restarts = 0
        self.ids: list[bytes] = []

    def call(self, verb: ModuleType, argv: list) -> Any:
        return step_checked(verb, argv, self.space, now=self.now, run_id=self.run_id)

    def common_step(self, kind: str, a: int, b: int) -> bool:
        """Take a sweep, promote, tick or restart step; False for any other kind."""
        if kind == "sweep":
            self.call(stalled_check, ["emq.stalled.check", "q", "MAXSTALLED", b + 1])
        elif kind == "promote":
            self.call(promote, ["emq.promote", "q"])
        elif kind == "tick":
            self.now += a * 7
        elif kind == "restart":
            self.restarts += 1
            self.run_id = b"%040d" % self.restarts
        else:
            return False
        return True
