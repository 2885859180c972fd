"""Fencing tokens across the rows of one id (PROTOCOL.md 6.1): no token is accepted but
by the job and the claim that issued it.

A token is a row's `attempts`, so a row that is gone (EMQ.REMOVE, retention)
and is created again under the same id would hand out 1, 2, ... again, and a
worker still holding a token of the earlier job would have it accepted on the
new one. So a row created under an explicit id (ADD's ID, a flow's, a
schedule's NAME:SLOT) starts its `attempts` at the queue's floor F, a number
at least every token the queue has issued: its first claim issues F + 1.

F costs nothing per claim. A claim of a row without `attempts` (every
generated id's first claim: the job cycle) issues 1, and the queue has issued
one as soon as it has added a job, which `meta.seq` says; a claim of a row
that already holds a token (a job claimed again after REQUEUE, a retry, a
recovery, or an explicit id's row) writes `meta.token_floor` when it issues a
token above it. So F = max(token_floor, 1 once `seq` exists, the start's
`id_base`), where the last covers, without a log, the tokens of an earlier
process (as ids do). Generated ids never repeat, so their rows need none of
this and their first token stays 1; and a number the generator has not reached
yet, once taken as an explicit id, moves `meta.seq` past it (enqueue.py), so
that it is never generated after that row is gone.

The row's `attempts` before its first claim is then a number, not absent: the
holder's guard (job.held) answers `job gone` to any token for a row that was
never claimed (no `claimed_ms`), and PROMOTE tells a job claimed before by
`claimed_ms`. The budgets are `failures` and `stalled`, never `attempts`, so
no budget changes.
"""

from __future__ import annotations

from typing import Final

from emqd.commit.plan import Op
from emqd.config import Config
from emqd.layout import QueueKeys
from emqd.store import hash as hashes
from emqd.store.hash import Hash, incremented
from emqd.store.keyspace import View

FLOOR: Final = b"token_floor"  # meta field: the highest token issued from a row holding one
SEQ: Final = b"seq"


def _stored_floor(meta: Hash | None) -> int:
    """`meta.token_floor` (0 when absent); one HINCRBY would refuse refuses the verb."""
    return incremented(None if meta is None else hashes.get(meta, FLOOR), 0)


def first_attempts(meta: Hash | None, config: Config) -> int:
    """The `attempts` a row created under an explicit id starts with (0: none written):
    at least every token the queue has issued."""
    floor = max(_stored_floor(meta), config.id_base or 0)
    if meta is not None and hashes.has(meta, SEQ):
        floor = max(floor, 1)  # a job was added, so token 1 may have been issued
    return floor


def raised(view: View, keys: QueueKeys, token: int) -> Op | None:
    """CLAIM issued `token` from a row that already held one: the write that keeps
    `meta.token_floor` at the highest such token, or None when it already is."""
    meta = view.hash(keys.meta)
    if token <= _stored_floor(meta):
        return None
    return (b"HSET", keys.meta, FLOOR, b"%d" % token)
