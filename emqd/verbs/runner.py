"""The read -> decide -> plan loop that turns a pure planner into a command.

A verb module provides three functions:

    parse(argv) -> args                       refuses bad input (ReplyError)
    parse(argv, config) -> args               refuses bad input (ReplyError); the
                                              server Config gives defaults (max-payload, ...)
    decide(args, reads, now_ms, run_id)       -> Need(...) | verdict
    plan(args, verdict, now_ms, run_id)       -> Plan | Block | reply value

`decide` gets `reads`, a dict from each read it asked for to its result, and
either asks for more (`Need`) or returns a verdict; it never touches the store,
a socket or the clock. The runner performs the reads against the keyspace and
calls `decide` again until it has a verdict, then asks `plan` for the plan. No
await happens anywhere in this loop, so the read, the decision and the apply of
one verb are one atomic unit on the event loop.

Reads are tuples naming a store read, so that they can be dict keys and tests
can fake them:

    (HGETALL, key)                 -> dict | None  (a read-only view)
    (HGET, key, field)             -> bytes | None
    (ZSCORE, key, member)          -> float | None
    (ZCARD, key)                   -> int
    (ZHEAD, key, n)                -> [(member, score)] the n lowest, in ZPOPMIN order
    (ZUPTO, key, max_score, n)     -> [(member, score)] score <= max_score, first n
    (TYPE, key)                    -> "none" | "hash" | "zset"

A read of a key holding the other type raises WRONGTYPE, which refuses the
whole verb before anything is written.

`decide` runs again from the top after every round of reads, so a verb that
will certainly need more reads may name them as `ahead` in the same `Need`:
the runner performs them in the same round, and keeps only those that
succeed, so a refusal (WRONGTYPE) still comes when `decide` asks for that
read in its turn. The keyspace does not change between rounds, so a value
read ahead is the value that would have been read later.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from emqd import clock
from emqd.command import Command, command
from emqd.errors import ReplyError
from emqd.session import Session
from emqd.store.keyspace import Keyspace

HGETALL = "HGETALL"
HGET = "HGET"
ZSCORE = "ZSCORE"
ZCARD = "ZCARD"
ZHEAD = "ZHEAD"
ZUPTO = "ZUPTO"
TYPE = "TYPE"

Read = tuple
Reads = dict


@dataclass(slots=True)
class Need:
    """What `decide` must see before it can decide.

    Not frozen, like the verbs' per-call args and verdicts: a frozen
    dataclass's __init__ sets each field through object.__setattr__, about
    5x the cost of a plain one, on every call of the hot verbs. Nothing
    mutates them after construction all the same.
    """

    reads: tuple[Read, ...]
    ahead: tuple[Read, ...] = ()  # likely next: read now if they succeed (module docstring)


def need(*reads: Read, ahead: tuple[Read, ...] = ()) -> Need:
    return Need(reads, ahead)


def perform(keyspace: Keyspace, read: Read) -> Any:
    """One read against the store (see the module docstring for the shapes).

    A table from the read's kind to its function, like `Keyspace.apply`'s ops:
    each verb makes 2-6 reads, and a chain of comparisons cost the later kinds
    (ZHEAD, ZUPTO) every test before theirs.
    """
    try:
        perform_kind = _READS[read[0]]
    except KeyError:
        raise ValueError(f"unknown read {read!r}") from None
    return perform_kind(keyspace, read)


def _hgetall(keyspace: Keyspace, read: Read) -> Any:
    return keyspace.hash(read[1])


def _hget(keyspace: Keyspace, read: Read) -> Any:
    row = keyspace.hash(read[1])
    return None if row is None else row.get(read[2])


def _zscore(keyspace: Keyspace, read: Read) -> Any:
    zset = keyspace.zset(read[1])
    return None if zset is None else zset.score(read[2])


def _zcard(keyspace: Keyspace, read: Read) -> Any:
    zset = keyspace.zset(read[1])
    return 0 if zset is None else len(zset)


def _zhead(keyspace: Keyspace, read: Read) -> Any:
    zset = keyspace.zset(read[1])
    if zset is None:
        return []
    if read[2] == 1:  # CLAIM's and one retention trim's read: no iterator needed
        first = zset.first()
        return [] if first is None else [(first[1], first[0])]
    return [(member, score) for score, member in zset.order.islice(0, read[2])]


def _zupto(keyspace: Keyspace, read: Read) -> Any:
    zset = keyspace.zset(read[1])
    if zset is None:
        return []
    pairs = zset.by_score(float("-inf"), read[2])
    out = []
    for score, member in pairs:
        if len(out) >= read[3]:
            break
        out.append((member, score))
    return out


def _type(keyspace: Keyspace, read: Read) -> Any:
    return keyspace.type_name(read[1])


_READS = {
    HGETALL: _hgetall,
    HGET: _hget,
    ZSCORE: _zscore,
    ZCARD: _zcard,
    ZHEAD: _zhead,
    ZUPTO: _zupto,
    TYPE: _type,
}


MAX_ROUNDS = 10_000  # a planner that keeps asking is a bug; fail loudly, never spin


def run(verb: ModuleType, session: Session, argv: list[bytes]) -> Any:
    """Parse, read until decided, plan. What the dispatcher commits or answers."""
    state = session.server
    args = verb.parse(argv, state.config)
    return decide_and_plan(verb, state.keyspace, args, clock.now_ms(), state.run_id_bytes)


def decide_and_plan(
    verb: ModuleType, keyspace: Keyspace, args: Any, now: int, run_id: bytes
) -> Any:
    """The loop without a session: housekeeping calls it with its own args."""
    reads: Reads = {}
    decide = verb.decide
    for _ in range(MAX_ROUNDS):
        step = decide(args, reads, now, run_id)
        if type(step) is not Need:
            return verb.plan(args, step, now, run_id)
        for read in step.reads:
            if read not in reads:
                reads[read] = perform(keyspace, read)
        for read in step.ahead:
            if read not in reads:
                try:
                    reads[read] = perform(keyspace, read)
                except ReplyError:
                    pass  # asked for in its turn, it refuses in its turn
    raise RuntimeError(f"{verb.__name__}.decide asked for reads {MAX_ROUNDS} times")


def verb_command(name: str, arity: int, flags: str, verb: ModuleType, summary: str = "") -> Command:
    """A command-table row that runs `verb` through the loop above."""

    def handler(session: Session, argv: list[bytes]) -> Any:
        return run(verb, session, argv)

    handler.__name__ = name.replace(".", "_")
    return command(
        name,
        arity,
        flags,
        handler,
        (1, 1, 1) if arity != 1 else (0, 0, 0),
        group="emq",
        summary=summary,
    )
