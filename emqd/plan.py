"""Plans: what a command decided to write, and what it answers.

An `Op` is a real Redis command as a tuple, name first, every value resolved
(`(b"ZADD", key, 17, b"42")`); values are bytes, int or float. The store
applies ops synchronously and the append-only file logs them as RESP, so the
log holds effects, never requests (no `now`, no relative delay, no INCR left
for a replay to recompute).

A handler returns a plain reply when it only read, a `Plan` when it writes,
or a `Block` when a blocking command must park its client.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Any

Op = tuple  # (b"HSET", key, field, value, ...): bytes | int | float after the name


@dataclass(slots=True)
class Plan:
    """Store operations applied atomically, then `reply` sent to the client."""

    ops: list[Op] = field(default_factory=list)
    reply: Any = "OK"


@dataclass(slots=True)
class Block:
    """Park the client until one of `keys` is written, or `timeout_ms` passes.

    On a write to a watched key the same command is run again; if it blocks
    again the client stays parked, first in line. `timeout_ms` 0 waits for
    ever; at the timeout the client gets `timeout_reply`. `plan`, when given,
    is applied before parking (writes a blocking command makes even when it
    finds nothing to return, such as CLAIM removing a ghost).
    """

    keys: tuple[bytes, ...]
    timeout_ms: int
    timeout_reply: Any
    plan: Plan | None = None


def removal(command: Op, present: Container[bytes], names: Iterable[bytes]) -> Plan:
    """DEL / HDEL / ZREM as Redis answers them: one op, `command` (name and key, if any)
    followed by the distinct `names` found in `present`; the reply is how many went.
    Nothing found, no op (so nothing is logged)."""
    gone = [name for name in dict.fromkeys(names) if name in present]
    return Plan([(*command, *gone)] if gone else [], len(gone))
