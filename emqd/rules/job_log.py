"""A job's log (EMQ.LOG writes it, EMQ.LOGS reads it): where its lines live, and how
they leave with their row.

The lines of job ID are the sorted set `p.."log:"..ID`, one member per line:
the score is the line's number (1, 2, 3, ... for the job's whole life, across
its attempts) and the member is `<number>:<line>`, so that the same line
logged twice is two members, and `ZRANGE p.."log:"..ID 0 -1` shows the lines
in order, numbered, to anyone with redis-cli. A sorted set rather than a hash
because both ends are what the verbs touch: LOG adds after the last number and
drops from the front past `keep_log_lines`, LOGS reads a range from the front,
each O(log n) where a hash would be scanned.

A log never outlives its row: every plan that deletes a row (retention's trims,
EMQ.REMOVE) deletes its log in the same DEL (`del_op`), so the
common case (a job that logged nothing) costs one lookup of the key and
nothing more.
"""

from __future__ import annotations

from typing import Final

from emqd import errors
from emqd.layout import QueueKeys
from emqd.store.keyspace import View
from emqd.store.zset import ZSet

MAX_LINE: Final = 4096  # bytes of one line (EMQ.LOG) or one progress value (EMQ.PROGRESS)
_NUMBER_MAX: Final = 1 << 53  # scores are doubles: every integer below this is exact


def member(number: int, line: bytes) -> bytes:
    return b"%d:%b" % (number, line)


def line_of(stored: bytes) -> bytes:
    """The line a member holds: what follows its number (a member a client wrote
    without one is shown whole)."""
    number, colon, line = stored.partition(b":")
    return line if colon and number.isdigit() else stored


def next_number(log: ZSet | None) -> int:
    """The number of the next line: one past the last (1 for an empty log).

    The last score is validated first (a client's ZADD may have put anything
    there): one that is not an integer of the exact range refuses the verb.
    """
    if log is None or not log:
        return 1
    last, _ = next(log.walk(len(log) - 1, len(log)))
    if not (0 <= last < _NUMBER_MAX - 1) or last != int(last):
        raise errors.CORRUPT_JOB_LOG()
    return int(last) + 1


def del_op(view: View, keys: QueueKeys, ids: list[bytes]) -> tuple[bytes, ...]:
    """`DEL` of these jobs' rows, and of each one's log that exists (whatever its type:
    DEL deletes any). Retention calls it on the hot verbs' path (a COMPLETE at its
    queue's bound deletes one row), hence the case of one row written apart."""
    type_name = view.type_name
    if len(ids) == 1:
        job_id = ids[0]
        log = keys.log_prefix + job_id
        if type_name(log) == "none":
            return (b"DEL", keys.job_prefix + job_id)
        return (b"DEL", keys.job_prefix + job_id, log)
    logs = [keys.log_prefix + job_id for job_id in ids]
    return (b"DEL", *[keys.job_prefix + job_id for job_id in ids],
            *[log for log in logs if type_name(log) != "none"])
