"""EMQ.FLOW queue payload [ID id] [DELAY delay-ms | AT unix-time-ms] [PRIORITY priority]
[MAXATTEMPTS max-attempts] [BACKOFF backoff-rule] [GROUP group] [TRACE trace-context]
[ONCHILDFAIL <FAIL | IGNORE | REMOVE>] CHILD child-queue child-payload [ID id]
[DELAY delay-ms | AT unix-time-ms] [PRIORITY priority] [MAXATTEMPTS max-attempts]
[BACKOFF backoff-rule] [GROUP group] [TRACE trace-context] [ONCHILDFAIL <FAIL | IGNORE | REMOVE>]
[UNDER under] [CHILD ...]

One plan adds a parent and its children (rules/flows.py): each child may live
in another queue, and may itself be the parent of later children (`UNDER n`
names its parent: 0, the default, is the flow's parent, k the k-th CHILD of
this call, which must come before it; so a cycle cannot be written). Options
of each job: ADD's (ID, DELAY | AT, PRIORITY, MAXATTEMPTS, BACKOFF, GROUP, TRACE),
and for a job with children ONCHILDFAIL fail|ignore|remove (default fail).

A job with children waits in its queue's `waiting` set (`state waiting`)
with `children`, `children_left` (both the number of its children) and
`on_child_fail` when given; its record `p.."children:"..ID` lists its
children's row keys, scored by their place in the call. Every child's row
has `parent`, its parent's row key. A job without children enters pending
(or its lane, or `scheduled` with DELAY / AT) as with ADD. Ids, sequence
numbers and the queues' counters are ADD's (rules/enqueue.py).

Returns: `[parent_id, [child_id, ...]]`, the children in the order given.
With the parent's ID of an existing row, nothing is written and the answer
lists that flow's jobs as its records hold them (idempotent, like ADD's ID).

Errors: ADD's for each job's options; `ERR ONCHILDFAIL must be fail, ignore
or remove`; `ERR UNDER must name the parent (0) or an earlier CHILD of the
flow`; `ERR a job with children cannot have DELAY or AT ...`; `ERR
ONCHILDFAIL is for a job with children`; `ERR a flow names the same job
twice`; `EMQSTATE job 'x' already exists in queue 'q'` for a child's ID;
`ERR syntax error` for CHILD without its queue and payload, an unknown or
repeated option (UNIQUE among them). Every refusal writes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Final

from emqd import errors
from emqd.command import verb_command
from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.layout import QueueKeys, queue_keys, split_job_key
from emqd.rules import args as parse_args
from emqd.rules import enqueue, flows
from emqd.store.keyspace import View
from emqd.verbs import add

NAME: Final = "emq.flow"
CHILD: Final = b"CHILD"
_OWN: Final = frozenset({b"ONCHILDFAIL", b"UNDER"})


@dataclass(slots=True)
class Node:
    """One job of the flow: ADD's arguments, its parent's index, its children's."""

    job: add.AddArgs
    policy: bytes | None
    under: int | None  # None: the flow's parent itself
    children: list[int] = field(default_factory=list)


@dataclass(slots=True)
class FlowArgs:
    nodes: list[Node]
    config: Config


def parse(argv: list[bytes], config: Config) -> FlowArgs:
    raw: list[tuple[bytes, bytes, dict[bytes, bytes | None]]] = [(argv[1], argv[2], {})]
    i, n = 3, len(argv)
    while i < n:
        word = argv[i].upper()
        if word == CHILD:
            if i + 2 >= n:
                raise errors.SYNTAX()
            raw.append((argv[i + 1], argv[i + 2], {}))
            i += 3
            continue
        opts = raw[-1][2]
        if word in opts or i + 1 >= n or (word not in add.OPTIONS and word not in _OWN) or (
                word == b"UNDER" and len(raw) == 1):
            raise errors.SYNTAX()
        opts[word] = argv[i + 1]
        i += 2
    if len(raw) == 1:
        raise errors.SYNTAX()
    nodes = [_node(k, queue, payload, opts, config) for k, (queue, payload, opts)
             in enumerate(raw)]
    seen: set[tuple[bytes, bytes]] = set()
    for k, node in enumerate(nodes):
        if node.under is not None:
            nodes[node.under].children.append(k)
        job_id = node.job.id
        if job_id is not None:
            if (node.job.keys.queue, job_id) in seen:
                raise errors.FLOW_SAME_ID()
            seen.add((node.job.keys.queue, job_id))
    for node in nodes:
        if node.children and (node.job.delay is not None or node.job.at is not None):
            raise errors.FLOW_PARENT_DELAY()
        if node.policy is not None and not node.children:
            raise errors.FLOW_POLICY_WITHOUT_CHILDREN()
    return FlowArgs(nodes, config)


def _node(index: int, queue: bytes, payload: bytes, opts: dict[bytes, bytes | None],
          config: Config) -> Node:
    keys = queue_keys(parse_args.queue_name(queue))
    if len(payload) > config.max_payload:
        raise errors.PAYLOAD_TOO_BIG()
    raw_policy = opts.pop(b"ONCHILDFAIL", None)
    raw_under = opts.pop(b"UNDER", None)
    under = None
    if index:
        under = 0 if raw_under is None else parse_args.non_negative(raw_under, "UNDER")
        if under >= index:
            raise errors.FLOW_UNDER()
    policy = None if raw_policy is None else flows.parse_args_policy(raw_policy)
    return Node(add.parse_options(keys, payload, opts, config), policy, under)


def plan(args: FlowArgs, view: View, now_ms: int, run_id: bytes) -> Plan:
    nodes = args.nodes
    root = nodes[0].job
    if root.id is not None and view.type_name(root.keys.job(root.id)) != "none":
        return Plan([], [root.id, _existing(view, root.keys, root.id)], None, ())
    for node in nodes[1:]:
        job_id = node.job.id
        if job_id is not None and view.type_name(node.job.keys.job(job_id)) != "none":
            raise errors.job_exists(node.job.keys.queue, job_id)
    new = enqueue.Enqueue(view, args.config, now_ms)
    for node in nodes:  # a child's explicit id is not the sequence's for an earlier job
        if node.job.id is not None:
            new.reserve(node.job.keys, node.job.id)
    ids: list[bytes] = []
    records: list[Op] = []
    for node in nodes:
        job = node.job
        spec = job.new_job()
        if node.under is not None:
            parent = nodes[node.under].job
            spec.fields += [flows.PARENT, parent.keys.job(ids[node.under])]
        if node.children:
            count = b"%d" % len(node.children)
            spec.fields += [flows.CHILDREN, count, flows.LEFT, count]
            if node.policy is not None:
                spec.fields += [flows.POLICY, node.policy]
        due = None if node.children else add.due_time(job, now_ms)
        ids.append(new.add(job.keys, spec, job.id, due, waiting=bool(node.children)))
    for k, node in enumerate(nodes):
        if node.children:
            records += _record(view, node.job.keys, ids[k], nodes, ids, node.children)
    return Plan([*new.ops(), *records], [ids[0], ids[1:]], new.events, tuple(new.due))


def _record(view: View, keys: QueueKeys, job_id: bytes, nodes: list[Node], ids: list[bytes],
            children: list[int]) -> list[Op]:
    """The parent's record: its children's row keys, scored by their place in the flow."""
    record, results = keys.children(job_id), keys.results(job_id)
    ops: list[Op] = []
    stale = [key for key in (record, results) if view.type_name(key) != "none"]
    if stale:
        ops.append((b"DEL", *stale))  # left by a client under a new parent's id
    zadd: list[Any] = [b"ZADD", record]
    for k in children:
        zadd += [k, nodes[k].job.keys.job(ids[k])]
    ops.append(tuple(zadd))
    return ops


def _existing(view: View, keys: QueueKeys, job_id: bytes) -> list[bytes]:
    """An existing flow's jobs below `job_id`, in the order they were given (their scores)."""
    found: list[tuple[float, bytes]] = []
    todo = [(keys, job_id)]
    seen: set[bytes] = set()
    while todo:
        parent_keys, parent_id = todo.pop()
        record = view.zset(parent_keys.children(parent_id))
        for score, child_key in () if record is None else record:
            where = split_job_key(child_key)
            if where is None or child_key in seen or not parse_args.is_queue_name(where[0]):
                continue  # not a job key a flow writes (a client's): nothing below it
            seen.add(child_key)
            found.append((score, where[1]))
            todo.append((queue_keys(where[0]), where[1]))
    return [job_id for _, job_id in sorted(found)]


COMMANDS: Final = [
    verb_command(NAME, -6, "write denyoom", sys.modules[__name__],
                 summary="Add a parent job that runs once its children are done")
]
