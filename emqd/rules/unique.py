"""Unique jobs (`EMQ.ADD ... UNIQUE key [TTL ttl-ms]`): one live job per key.

Keys: `p.."unique"` (hash: key -> the id of the job holding it) and
`p.."unique:ttl"` (zset: key -> the time its hold ends, for keys added with
TTL). The job's row names its key (`unique`) and, with TTL, when the hold
ends (`unique_until`).

A key is held:
- without TTL, while its job is live: pending, scheduled, active or waiting.
  The plan that ends the job (COMPLETE, a death, REMOVE) frees the key in the
  same plan (`release_ops`); a revived job takes it back when it is free
  (`retake_ops`), and goes on without it when another job holds it by then.
- with TTL, until the time passes, whatever the job does meanwhile (a
  throttle: a job completed at once still keeps duplicates out until then).

An ADD that finds its key held adds nothing and answers the holder's id.
Each ADD with UNIQUE also deletes up to PURGE keys whose TTL has passed, so
the table does not keep keys nobody adds again. Every value read is checked:
a holder's row of the wrong type answers WRONGTYPE like any read.
"""

from __future__ import annotations

from typing import Final

from emqd.commit.plan import Op
from emqd.layout import QueueKeys
from emqd.rules import job
from emqd.store import hash as hashes
from emqd.store.hash import Hash
from emqd.store.keyspace import View
from emqd.store.zset import ZSet

UNIQUE: Final[bytes] = b"unique"  # row field: the key the job holds (typed: read by ties.py)
UNTIL: Final = b"unique_until"  # row field: when a TTL hold ends
PURGE: Final = 16  # expired TTL keys deleted by one ADD, at most


def is_live(state: bytes | None) -> bool:
    """Pending, scheduled, active or waiting: a job that holds its key."""
    return state in (job.PENDING, job.SCHEDULED, job.ACTIVE, job.WAITING)


def holder(view: View, keys: QueueKeys, key: bytes, now_ms: int) -> bytes | None:
    """The id of the job that holds `key` at `now_ms`, or None when it is free."""
    table = view.hash(keys.unique)
    owner = None if table is None else hashes.get(table, key)
    if owner is None:
        return None
    ttl = view.zset(keys.unique_ttl)
    until = None if ttl is None else ttl.score(key)
    if until is not None:
        return owner if now_ms < until else None
    row = view.hash(keys.job(owner))
    if row is None or not is_live(hashes.get(row, job.STATE)):
        return None  # a hold its job did not free (a client's write): stale
    return owner


def take_ops(view: View, keys: QueueKeys, key: bytes, job_id: bytes, until: int | None,
             now_ms: int) -> list[Op]:
    """`job_id` holds `key` (until `until`, with TTL); expired TTL keys purged on the way."""
    ttl = view.zset(keys.unique_ttl)
    expired = [] if ttl is None else [m for m in ttl.due(now_ms, PURGE + 1) if m != key][:PURGE]
    ops: list[Op] = []
    if expired:
        ops += [(b"HDEL", keys.unique, *expired), (b"ZREM", keys.unique_ttl, *expired)]
    ops.append((b"HSET", keys.unique, key, job_id))
    if until is not None:
        ops.append((b"ZADD", keys.unique_ttl, until, key))
    else:
        ops += _ended_ttl_ops(keys, ttl, key)
    return ops


def _ended_ttl_ops(keys: QueueKeys, ttl: ZSet | None, key: bytes) -> list[Op]:
    """A key now held while its job lives: the entry of the TTL hold that ended goes (left
    behind, `holder` would trust it over the live owner and call the key free)."""
    return [(b"ZREM", keys.unique_ttl, key)] if ttl is not None and key in ttl else []


def retake_ops(view: View, keys: QueueKeys, job_id: bytes, row: Hash, now_ms: int) -> list[Op]:
    """A revived job holds its key again, when nobody else does."""
    key = hashes.get(row, UNIQUE)
    if key is None or hashes.has(row, UNTIL) or holder(view, keys, key, now_ms) is not None:
        return []
    return [(b"HSET", keys.unique, key, job_id),
            *_ended_ttl_ops(keys, view.zset(keys.unique_ttl), key)]


def release_ops(view: View, keys: QueueKeys, job_id: bytes, row: Hash) -> list[Op]:
    """A job that held its key while live is done: the key is free (unless it moved on)."""
    key = hashes.get(row, UNIQUE)
    if key is None or hashes.has(row, UNTIL):
        return []
    table = view.hash(keys.unique)
    if table is None or hashes.get(table, key) != job_id:
        return []
    return [(b"HDEL", keys.unique, key)]
