"""What the client raises, and what a handler raises to steer its job.

emqd's error replies start with a code (section 4 of the protocol). The two
EMQ codes get their own classes so that callers can tell "someone else holds
this job now" from a bad argument; both stay `redis.ResponseError`s, so code
that already catches redis-py's errors keeps working. The codes are read from
emqd/errors.py, where the server defines its texts once.
"""

from __future__ import annotations

from redis.exceptions import (
    AuthenticationError,
    ClusterDownError,
    MasterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from emqd import errors as server_errors

STALE_CODE = server_errors.STALE_GONE.message.split()[0].decode()
STATE_CODE = server_errors.STATE_ACTIVE.message.split()[0].decode()
CANCELLED_CODE = server_errors.CANCELLED.message.split()[0].decode()

#: Errors that mean "the server could not be reached", after which the worker
#: backs off and reconnects instead of giving up (but see `is_permanent`).
TRANSPORT_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)

#: A cluster's "not now" (docs/CLUSTER.md): the write was not acknowledged (a failover,
#: a queue that moved), the slot has no primary yet, or the front asked does not own the
#: queue: the queue's retried batches are sent again, and the owner is looked up again
#: (routes.py).
NOT_NOW = (TryAgainError, ClusterDownError)

#: Error replies that mean "not now": the worker backs off and tries again.
#: MISCONF: the server cannot write its log (a full disk); BUSY, LOADING and
#: the cluster's codes pass by themselves. (redis-py strips the code of the
#: ones it has a class for.)
_TRANSIENT_REPLIES = (TryAgainError, ClusterDownError, MasterDownError, ReadOnlyError,
                      OutOfMemoryError)
_TRANSIENT_CODES = frozenset({"MISCONF", "BUSY", "LOADING"})


def is_permanent(error: BaseException) -> bool:
    """True for a refusal that no retry can fix: a wrong or missing password
    (WRONGPASS, NOAUTH: redis-py raises them as ConnectionErrors), and any other
    error reply to the worker's own commands (an option the server does not know,
    a queue name it refuses, WRONGTYPE), except the "not now" replies above and a
    cancelled job's (one job's end, not the worker's)."""
    if isinstance(error, AuthenticationError):
        return True
    if isinstance(error, JobCancelled):
        return False
    if isinstance(error, ResponseError):
        return not (isinstance(error, _TRANSIENT_REPLIES)
                    or str(error).split(" ", 1)[0] in _TRANSIENT_CODES)
    return False


class PermanentError(Exception):
    """The worker stopped because the server refused it for good (`is_permanent`):
    `Worker.run()` raises it after draining, and emqd-worker exits non-zero."""

    def __init__(self, what: str, cause: BaseException) -> None:
        hint = _HINTS.get(type(cause), "")
        super().__init__(f"{what} refused: {type(cause).__name__}: {cause}{hint}")
        self.cause = cause


_HINTS: dict[type[BaseException], str] = {
    AuthenticationError: " (check the password: redis://:PASSWORD@HOST:PORT in --url or "
                         "$EMQD_URL)"}


class StaleJob(ResponseError):
    """EMQSTALE: the token no longer holds the job (gone, claimed again, or not active)."""


class JobCancelled(ResponseError):
    """EMQCANCELLED: EMQ.CANCEL ended the job its holder still runs (the message ends with
    the canceller's reason). The Worker stops the run and sends nothing more about it."""


class JobStateError(ResponseError):
    """EMQSTATE: the job is in the wrong state for a verb that takes no token."""


# The error replies redis-py gives a class of their own, without their code (as its
# parser does), for the Worker's own connections (emqd/client/connection.py).
_REPLY_CLASSES: dict[str, type[Exception]] = {
    "WRONGPASS": AuthenticationError, "NOAUTH": AuthenticationError,
    "TRYAGAIN": TryAgainError, "CLUSTERDOWN": ClusterDownError,
    "MASTERDOWN": MasterDownError, "READONLY": ReadOnlyError, "OOM": OutOfMemoryError}


def reply_error(error: ResponseError) -> Exception:
    """An error reply as hiredis read it (the whole text) as the exception redis-py would
    have raised for it, then as the client's own (`translate`: StaleJob, ...)."""
    text = str(error)
    code, _, rest = text.partition(" ")
    known = _REPLY_CLASSES.get(code)
    if known is not None:
        return known(rest)
    return translate(error)


def translate(error: ResponseError) -> ResponseError:
    """The client's class for a server error reply; other replies pass through unchanged."""
    code = str(error).split(" ", 1)[0]
    if code == STALE_CODE:
        return StaleJob(str(error))
    if code == STATE_CODE:
        return JobStateError(str(error))
    if code == CANCELLED_CODE:
        return JobCancelled(str(error))
    return error


class JobDead(Exception):
    """`add_and_wait`: the job was dead-lettered; `error` is its last error."""

    def __init__(self, job_id: str, error: str | None) -> None:
        super().__init__(f"job {job_id} is dead: {error}")
        self.job_id, self.error = job_id, error


class ConnectionLost(RedisConnectionError):
    """An add or a wait that could not reach the server within the queue's `reconnect_s`.

    `job_id` is the job's id (the client picks it before the first try, so that a retried
    ADD cannot make a second job); `added` says whether the server acknowledged the job
    (True: it exists, `wait(job_id)` later; False: unknown, add it again with
    `id=job_id` and at most one job results); `job_ids` lists every job of an `add_many`
    (`job_id` is the first). A redis-py `ConnectionError`, so code that catches those
    goes on catching it."""

    def __init__(self, job_id: str, added: bool, cause: BaseException,
                 job_ids: list[str] | None = None) -> None:
        state = "was added" if added else "may not have been added"
        super().__init__(f"job {job_id} {state}, and the server could not be reached again: "
                         f"{type(cause).__name__}: {cause}")
        self.job_id, self.added, self.cause = job_id, added, cause
        self.job_ids = job_ids or [job_id]


class WaitTimeout(TimeoutError):
    """`add_and_wait`: the job was not finished in time (it is still in the queue)."""

    def __init__(self, job_id: str, timeout_ms: int) -> None:
        super().__init__(f"job {job_id} not finished after {timeout_ms} ms")
        self.job_id = job_id


class Retry(Exception):
    """Raised by a handler: fail this attempt and retry after `delay_ms`.

    The worker sends FAIL with BACKOFF `delay_ms` (or the job's own backoff rule
    when `delay_ms` is None). It is a failure: it spends one unit of the job's
    retry budget, so at the cap the job is dead-lettered like any failure.
    """

    def __init__(self, delay_ms: int | None = None, reason: str = "") -> None:
        if delay_ms is not None and (not isinstance(delay_ms, int) or delay_ms < 0):
            raise ValueError("delay_ms must be a non-negative integer or None")
        super().__init__(reason or (f"retry in {delay_ms} ms" if delay_ms is not None else "retry"))
        self.delay_ms = delay_ms


class Snooze(Exception):
    """Raised by a handler: not now; run this job again in `seconds` (River's JobSnooze,
    Oban's {:snooze, s}).

    The worker sends REQUEUE with DELAY (PROTOCOL.md 22.1): no failure is spent and the
    job is not dead-lettered however often it snoozes; its token (`attempts`) still
    rises at the next claim.
    """

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not (
                0 <= seconds < 2**53 / 1000):
            raise ValueError("seconds must be a non-negative number")
        super().__init__(f"snoozed for {seconds} s")
        self.delay_ms = max(1, round(seconds * 1000)) if seconds else 0


class Discard(Exception):
    """Raised by a handler: this job can never succeed; dead-letter it now.

    The worker sends FAIL with MAXATTEMPTS 1, so the job dies whatever budget is
    left; EMQ.REVIVE brings it back.
    """
