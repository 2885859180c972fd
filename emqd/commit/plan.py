"""Plans: what a command decided to write, what it answers, and what it did.

An `Op` is a real Redis command as a tuple, name first, every value resolved
(`(b"ZADD", key, 17, b"42")`); values are bytes, int or float. The store
applies ops synchronously and the append-only file logs them as RESP, so the
log holds effects, never requests (no `now`, no relative delay, no INCR left
for a replay to recompute).

A handler returns a plain reply when it only read, a `Plan` when it writes,
or a `Block` when a blocking command must park its client. A verb's plan also
says what happened (`events`, emqd/commit/events.py) and when housekeeping has work
because of it (`due`), so that nobody has to read its ops again to find out.
A plan whose ops are the same every time but for some values can name its
`Shape`, from which its log record is formatted in one step.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any, Final

from emqd.commit.events import Event
from emqd.store.keyspace import ShapeApplier

Op = tuple[Any, ...]  # (b"HSET", key, field, value, ...): bytes | int | float after the name

# A value this long (a payload, a RESULT, a plain HSET's value) is logged from
# itself, never copied (persist/records.py); a verb builds the generic plan for
# it instead of its Shape, whose one-step formatting would copy it.
BIG_VALUE: Final = 64 * 1024

# Plan.due entries, (what, queue, at_ms), for housekeeping (emqd/serve/housekeeping.py):
SCHEDULED: Final = 0  # a job waits in `scheduled` until at_ms (promotion)
LEASED: Final = 1  # a lease runs out at at_ms (the stall sweep)
CONFIGURED: Final = 2  # the queue's settings changed (retention may have rows to trim); at_ms 0
REPEATING: Final = 3  # a schedule of the queue adds its next job at at_ms (verbs/repeat.py)
AGING: Final = 4  # a finished row outlives keep_completed_ms / keep_dead_ms at at_ms (retention)
RATED: Final = 5  # a lane held out of the ring by its rate limit may be served at at_ms
Due = tuple[int, bytes, int]  # (SCHEDULED | LEASED | ... | RATED, queue, at_ms)


class Plan:
    """Store operations applied atomically, then `reply` sent to the client.

    `events`: the transitions the plan makes, in order (verbs only).
    `due`: what housekeeping must know of it; None for a plain Redis command's
    plan, whose ops housekeeping looks at itself (a client may ZADD into a
    queue's `scheduled` by hand); a verb always declares (an empty tuple when
    it has nothing to say).
    `shape`: the Shape that built `ops`, when one did (its record is a template).

    A plain class, not a dataclass: mypyc gives a dataclass the interpreted
    `__init__` that `dataclasses` generates, which every plan (three a job cycle)
    would pay for; this one compiles.
    """

    __slots__ = ("ops", "reply", "events", "due", "shape")

    def __init__(self, ops: list[Op], reply: Any = "OK", events: list[Event] | None = None,
                 due: tuple[Due, ...] | None = None, shape: Shape | None = None) -> None:
        self.ops = ops
        self.reply = reply
        self.events = events
        self.due = due
        self.shape = shape

    def __repr__(self) -> str:
        return (f"Plan(ops={self.ops!r}, reply={self.reply!r}, events={self.events!r}, "
                f"due={self.due!r}, shape={self.shape!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and (
            (self.ops, self.reply, self.events, self.due, self.shape)
            == (other.ops, other.reply, other.events, other.due, other.shape))


class Block:
    """Park the client until one of `keys` is written, or `timeout_ms` passes.

    On a write to a watched key the same command is run again; if it blocks
    again the client stays parked, first in line. `timeout_ms` 0 waits for
    ever; at the timeout the client gets `timeout_reply`. `plan`, when given,
    is applied before parking (writes a blocking command makes even when it
    finds nothing to return, such as CLAIM removing a ghost). `wake_at_ms`,
    when given, runs the command again at that time even if no key was
    written (a rate limit's window that frees: time, not a write, changes
    the answer). A plain class, as Plan is.
    """

    __slots__ = ("keys", "timeout_ms", "timeout_reply", "plan", "wake_at_ms")

    def __init__(self, keys: tuple[bytes, ...], timeout_ms: int, timeout_reply: Any,
                 plan: Plan | None = None, wake_at_ms: int | None = None) -> None:
        self.keys = keys
        self.timeout_ms = timeout_ms
        self.timeout_reply = timeout_reply
        self.plan = plan
        self.wake_at_ms = wake_at_ms

    def __repr__(self) -> str:
        return (f"Block(keys={self.keys!r}, timeout_ms={self.timeout_ms!r}, "
                f"timeout_reply={self.timeout_reply!r}, plan={self.plan!r}, "
                f"wake_at_ms={self.wake_at_ms!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Block) and (
            (self.keys, self.timeout_ms, self.timeout_reply, self.plan, self.wake_at_ms)
            == (other.keys, other.timeout_ms, other.timeout_reply, other.plan, other.wake_at_ms))


class Again:
    """`Later`'s answer that says: run the request again, here (the queue is here now)."""

    __slots__ = ()


AGAIN: Final = Again()


class Later:
    """A reply given later, by another process a router sent the request to
    (emqd/core.py `Router`; cluster mode's: the queue's owner front, or the cluster
    itself): `future` is an asyncio future whose result is the reply value
    (bytes already encoded come as `reply.Raw`). The client's requests behind it wait,
    as they do behind a parked one, so its replies stay in order; but when it was
    `sent` on already (its queue's owner known), the next request sent on the same way
    goes too, and only the replies wait (a pipeline through a router stays one; such a
    reply is never AGAIN). Sans-IO here: only the connection (wire/protocol.py) waits on
    the future."""

    __slots__ = ("future", "sent")

    def __init__(self, future: Any, sent: bool = False) -> None:
        self.future = future
        self.sent = sent


def removal(command: Op, present: Container[bytes], names: Iterable[bytes]) -> Plan:
    """DEL / HDEL / ZREM as Redis answers them: one op, `command` (name and key, if any)
    followed by the distinct `names` found in `present`; the reply is how many went.
    Nothing found, no op (so nothing is logged)."""
    gone = [name for name in dict.fromkeys(names) if name in present]
    return Plan([(*command, *gone)] if gone else [], len(gone))


class Slot:
    """A value of a `Shape` that changes from call to call (always bytes)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Shape:
    """Ops that are the same on every call but for some values, declared once.

    `shape.ops(*values)` builds the ops (values in the order the slots first
    appear), `shape.body(ops)` formats them as RESP in one `%` (the log's
    record, without MULTI/EXEC), `shape.op_args(ops)` each op as a run of a
    script's arguments (its count, then its arguments: the cluster sink's form,
    emqd/cluster/, which may drop an op a later one in its batch overwrites:
    `merged` names the HSETs of constant fields, `op_counts` each op's
    arguments), and `shape.applier.apply(keyspace, ops)` makes
    their writes with direct calls (store/keyspace.py `ShapeApplier`). They are
    generated from the declaration, as
    `collections.namedtuple` generates its class: written by hand they would
    repeat the declaration twice, and a generic per-argument encoder costs a
    cycle of the hot verbs 3-4 us (measured: 1.2 us against 4.9 us for CLAIM's
    three ops).
    """

    __slots__ = ("name", "template", "ops", "body", "op_args", "op_counts", "merged",
                 "applier")

    def __init__(self, name: str, *template: tuple[Any, ...]) -> None:
        self.name = name
        self.template = template
        slots: list[str] = []
        op_sources: list[str] = []
        fmt: list[bytes] = []  # the body's format, op after op
        pulled: list[str] = []  # the body's arguments: where each slot's value is in `ops`
        namespace: dict[str, Any] = {}
        runs: list[str] = []  # each op's run of script arguments, as a `%` of its own
        for i, op in enumerate(template):
            count = b"%d" % len(op)
            fmt.append(b"*%d\r\n" % len(op))
            run = [b"$%d\r\n%b\r\n" % (len(count), count)]
            parts = []
            own: list[str] = []
            for j, arg in enumerate(op):
                if isinstance(arg, Slot):
                    if arg.name not in slots:
                        slots.append(arg.name)
                    parts.append(arg.name)
                    piece = b"$%d\r\n%b\r\n"
                    own += [f"len(o{i}[{j}])", f"o{i}[{j}]"]
                else:
                    parts.append(repr(arg))
                    piece = (b"$%d\r\n" % len(arg) + arg + b"\r\n").replace(b"%", b"%%")
                fmt.append(piece)
                run.append(piece)
            pulled += own
            op_sources.append("(" + ", ".join(parts) + ",)")
            namespace[f"RUN{i}"] = b"".join(run)
            runs.append(f"RUN{i} % ({', '.join(own)},)" if own else f"RUN{i} % ()")
        unpack = ", ".join(f"o{i}" for i in range(len(template)))
        source = (
            f"def ops({', '.join(slots)}):\n    return [{', '.join(op_sources)}]\n"
            f"def body(ops):\n    {unpack}, = ops\n    return FMT % ({', '.join(pulled)},)\n"
            f"def op_args(ops):\n    {unpack}, = ops\n    return [{', '.join(runs)}]\n"
        )
        namespace["FMT"] = b"".join(fmt)
        exec(compile(source, f"<shape {name}>", "exec"), namespace)  # noqa: S102
        self.ops = namespace["ops"]
        self.body = namespace["body"]
        self.op_args = namespace["op_args"]
        self.op_counts = tuple(1 + len(op) for op in template)
        # An HSET of constant field names: a later one of the same key and names in the
        # same batch writes every field it does (the sink keeps only that one).
        self.merged = tuple(
            tuple(op[2::2]) if op[0] == b"HSET" and all(type(f) is bytes for f in op[2::2])
            else None for op in template)
        self.applier = ShapeApplier(template)  # the store's writes, with their primitives

    def __repr__(self) -> str:
        return f"Shape({self.name!r})"
