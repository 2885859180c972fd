"""How a pure planner becomes a command.

A verb module provides two functions:

    parse(argv, config) -> args               refuses bad input (ReplyError); the
                                              server Config gives defaults (max-payload, ...)
    plan(args, view, now_ms, run_id)          -> Plan | Block | reply value

`plan` reads the store through `view` (emqd/store/keyspace.py `View`: the
hashes and sorted sets, read-only), decides, and returns the plan of ops with
its reply; it never writes the store, touches a socket or reads the clock:
`now_ms` and `run_id` are inputs. A refusal raises ReplyError before anything
is written, because nothing is written until the dispatcher commits the plan.

The seed's planners ask for one read at a time and are answered (`Need`, then
the verdict). Here every read is answered at once by the store in this
process's memory (the cluster backend keeps each queue's store in the process
that owns the queue, so it stays so), which lets a planner be one plain pass:
a read is a method call, the verdict its return value. The earlier shape, a
`decide` run again from the top after each round of reads with the reads in a
dict, cost about 60% of a job cycle (docs/PERFORMANCE.md). Tests drive
planners with a keyspace built from plain data, and with a recording `View`
where the reads asked matter.

Nothing awaits between the first read and the end of `apply`, so the read, the
decision and the apply of one verb are one atomic unit on the event loop.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from emqd import clock
from emqd.command import Command, command
from emqd.session import Session


def verb_command(name: str, arity: int, flags: str, verb: ModuleType, summary: str = "") -> Command:
    """A command-table row that parses, then plans against the server's keyspace."""
    parse = verb.parse
    plan = verb.plan

    def handler(session: Session, argv: list[bytes]) -> Any:
        state = session.server
        return plan(parse(argv, state.config), state.keyspace, clock.now_ms(), state.run_id_bytes)

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
