"""The client's sans-IO core: EMQ commands built as argv, replies parsed into values.

Every queue operation is written once here, as a generator (an `Operation`)
that yields a batch of commands (one pipeline round trip) and receives that
batch's replies, as values or as `ResponseError` instances, and finally
returns the result. `Queue` (asyncio) and `SyncQueue` (blocking) only drive
these generators over a socket (emqd/client/queue.py), so the two share every
byte they send and every rule they parse by; tests drive them with canned
replies and no socket at all.

Ids, tokens, states, queue and group names are `str` (decoded with
`surrogateescape`, so any bytes round trip exactly; a token is compared by
the server as bytes); payloads and results are `bytes`, because they are the
producer's and the handler's own bytes, which need not be text (`json()`
reads them as JSON). Setting values are `str`, as the server stores them.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from redis.exceptions import ResponseError

from emqd.client import tracing
from emqd.client.errors import (
    TRANSPORT_ERRORS,
    ConnectionLost,
    JobCancelled,
    JobDead,
    WaitTimeout,
    translate,
)

T = TypeVar("T")
Command = tuple[bytes | str | int, ...]
#: Yields a batch of commands, receives their replies, returns the result.
Operation = Generator[list[Command], list[Any], T]

def text(raw: bytes | str) -> str:
    """Bytes from the wire as `str`; `raw_bytes` gives exactly the same bytes back."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape")


def raw_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def payload_bytes(payload: Any) -> bytes:
    """The one rule for every payload (add, add_unique, add_many, add_and_wait, flow,
    repeat, progress, log lines): bytes as they are, text as UTF-8, anything else (a dict,
    a list, a number) as compact JSON."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return json_bytes(payload)


def pick_id() -> str:
    """A job id picked by the client before the first try: an ADD sent again after a lost
    reply names the same job, which the server answers unchanged, so a retry never makes
    a second job. 32 hex digits (a random UUID): no two clients pick the same."""
    return uuid.uuid4().hex


class Retried(list[Any]):
    """A batch that may be sent again when the connection is lost before its replies
    came: sending it twice does what sending it once does (an ADD with its ID, a FLOW
    with its parent's ID, a WAIT). The drivers (queue.py) send it again, backing off,
    for up to the queue's `reconnect_s`, then throw the connection error into the
    operation. `again()` is the batch to send next time (a WAIT with the time left)."""

    def __init__(self, commands: list[Command],
                 again: Callable[[], Retried] | None = None) -> None:
        super().__init__(commands)
        self._again = again

    def again(self) -> Retried:
        return self if self._again is None else self._again()


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def result_bytes(value: Any) -> bytes | None:
    """A handler's return value as COMPLETE's RESULT: None sends no RESULT; anything else
    as a payload is sent (payload_bytes)."""
    return None if value is None else payload_bytes(value)


def expect(reply: Any) -> Any:
    """A reply value, or the client's exception for an error reply."""
    if isinstance(reply, ResponseError):
        raise translate(reply)
    if isinstance(reply, BaseException):
        raise reply
    return reply


def as_map(reply: Any) -> dict[str, Any]:
    """A map reply: RESP3 gives a dict, RESP2 a flat field/value list (as HGETALL)."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


class Reporter(Protocol):
    """What `Job.progress`, `Job.log` and `Job.children` go through: the Worker binds one
    to each job it runs (emqd/client/handler.py), so that a handler reports with the
    job's own token, and a lost connection is the worker's to ride out, not the job's."""

    def progress(self, job: Job, value: Any) -> Any: ...

    def log(self, job: Job, line: Any) -> Any: ...

    def children(self, job: Job) -> Any: ...

    def is_cancelled(self, job: Job) -> bool: ...


@dataclass(frozen=True)
class Job:
    """A claimed job as the handler sees it: CLAIM's `[id, token, payload, failures]`, and
    with WITHTRACE its producer's trace context (`trace`, None when it gave none)."""

    id: str
    payload: bytes
    token: str
    failures: int = 0
    reporter: Reporter | None = field(default=None, repr=False, compare=False)
    trace: str | None = field(default=None, repr=False, compare=False)

    def json(self) -> Any:
        return json.loads(self.payload)

    def progress(self, value: Any) -> Any:
        """EMQ.PROGRESS with this job's token, inside a Worker's handler: `await
        job.progress(50)` in an async handler, `job.progress(50)` in a plain one (it
        returns once the server answered). bytes and str go as they are, anything else
        as JSON. While the server is away it waits for it to come back (the worker
        reconnects); raises `StaleJob` when the lease is gone."""
        return self._reporter().progress(self, value)

    def log(self, line: Any) -> Any:
        """EMQ.LOG with this job's token (awaited, or not, as `progress`): appends a line
        to the job's log; the number of lines the log keeps."""
        return self._reporter().log(self, line)

    def children(self) -> Any:
        """EMQ.CHILDREN of this job (awaited, or not, as `progress`): a flow's parent reads
        its children, with their results, as `queue.children(job.id)` gives them."""
        return self._reporter().children(self)

    @property
    def cancelled(self) -> bool:
        """True once the worker learned that EMQ.CANCEL ended this job (its heartbeat, a
        report or the settling verb answered EMQCANCELLED): a plain handler polls it
        and returns early (whatever it returns is dropped). An async handler needs
        not: its task is cancelled. False outside a Worker's handler."""
        return self.reporter is not None and self.reporter.is_cancelled(self)

    def _reporter(self) -> Reporter:
        if self.reporter is None:
            raise RuntimeError("job.progress, job.log and job.children work inside a "
                               "Worker's handler; elsewhere use queue.progress(job, value), "
                               "queue.log(job, line), queue.children(job.id)")
        return self.reporter

    @classmethod
    def from_claim(cls, entry: list[Any], reporter: Reporter | None = None) -> Job:
        """CLAIM's four elements, or five with WITHTRACE (the trace context, or nil)."""
        if len(entry) == 4:
            job_id, token, payload, failures = entry
            return cls(text(job_id), bytes(payload), text(token), int(failures), reporter)
        job_id, token, payload, failures, trace = entry
        return cls(text(job_id), bytes(payload), text(token), int(failures), reporter,
                   None if trace is None else text(trace))


@dataclass(frozen=True)
class JobInfo:
    """A job row as EMQ.GET shows it (section 2); `fields` holds every field raw."""

    id: str
    state: str
    payload: bytes
    fields: dict[str, bytes] = field(repr=False)

    def json(self) -> Any:
        return json.loads(self.payload)

    def number(self, name: str, default: int | None = None) -> int | None:
        raw = self.fields.get(name)
        return default if raw is None else int(raw)

    @property
    def attempts(self) -> int:
        """Its fencing token as a number: one higher at each claim; a job added under an
        explicit id starts above every token its queue issued (PROTOCOL.md 6.1)."""
        return self.number("attempts", 0) or 0

    @property
    def failures(self) -> int:
        return self.number("failures", 0) or 0

    @property
    def stalled(self) -> int:
        return self.number("stalled", 0) or 0

    @property
    def last_error(self) -> str | None:
        raw = self.fields.get("last_error")
        return None if raw is None else text(raw)

    @property
    def result(self) -> bytes | None:
        return self.fields.get("result")

    @classmethod
    def from_row(cls, job_id: str, reply: Any) -> JobInfo:
        row = {k: bytes(v) for k, v in as_map(reply).items()}
        return cls(job_id, text(row.get("state", b"")), row.get("payload", b""), row)


STATS_FIELDS = ("pending", "active", "scheduled", "dead", "completed",
                "completed_total", "failed_total", "trimmed_dead", "paused", "waiting",
                "added_total", "dead_total", "failures_total", "retried_total", "stalled_total",
                "revived_total")


@dataclass(frozen=True)
class Stats:
    """EMQ.STATS: the queue's counts (section 5, "Reading and steering")."""

    pending: int = 0
    active: int = 0
    scheduled: int = 0
    dead: int = 0
    completed: int = 0
    completed_total: int = 0
    failed_total: int = 0
    trimmed_dead: int = 0
    paused: int = 0
    waiting: int = 0  # flows' parents waiting for their children
    # The counters as /metrics and the dashboard name them (failed_total: dead_total's old
    # name, jobs that died; failures_total: every EMQ.FAIL).
    added_total: int = 0
    dead_total: int = 0
    failures_total: int = 0
    retried_total: int = 0
    stalled_total: int = 0
    revived_total: int = 0

    @classmethod
    def from_reply(cls, reply: Any) -> Stats:
        values = as_map(reply)
        return cls(**{name: int(values.get(name, 0)) for name in STATS_FIELDS})


@dataclass(frozen=True)
class NewJob:
    """One job of `add_many` with options of its own: `NewJob(payload, priority=5)`.
    The payload is bytes, text, or any JSON value; the options are `add`'s."""

    payload: Any
    options: dict[str, Any]

    def __init__(self, payload: Any, **options: Any) -> None:
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "options", options)


@dataclass(frozen=True)
class Added:
    """EMQ.ADD ... UNIQUE: the job's id, and whether this call added it (False: the live job
    that already holds the key, or the existing row an `id` named). `verdict` is the
    server's word: `added`, `exists`, or with `replace` / `extend` (the debounce)
    `replaced` or `extended` (the waiting job took this add's payload or delay)."""

    id: str
    added: bool
    verdict: str = "added"


@dataclass(frozen=True)
class Child:
    """One job of a flow (`flow`): its queue, payload and `add`'s options; `under` is the
    flow job it belongs to (0: the flow's parent, k: the k-th child, which must come before
    it); `on_child_fail` ("fail", "ignore", "remove") for a child that has children."""

    queue: str | bytes
    payload: Any
    options: dict[str, Any]
    under: int = 0
    on_child_fail: str | None = None

    def __init__(self, queue: str | bytes, payload: Any, *, under: int = 0,
                 on_child_fail: str | None = None, **options: Any) -> None:
        object.__setattr__(self, "queue", queue)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "under", under)
        object.__setattr__(self, "on_child_fail", on_child_fail)


@dataclass(frozen=True)
class Flow:
    """EMQ.FLOW's reply: the parent's id and the children's, in the order given."""

    parent: str
    children: list[str]


@dataclass(frozen=True)
class ChildInfo:
    """EMQ.CHILDREN: one child of a parent, with its state and its result (None until it
    completed)."""

    queue: str
    id: str
    state: str
    result: bytes | None


@dataclass(frozen=True)
class Schedule:
    """EMQ.REPEATS: one schedule, its rule (`every_ms`, or `cron` and `tz`), its next slot."""

    name: str
    next_ms: int
    payload: bytes
    every_ms: int | None = None
    cron: str | None = None
    tz: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, reply: Any) -> Schedule:
        values = as_map(reply)
        every = values.pop("every", None)
        cron, tz = values.pop("cron", None), values.pop("tz", None)
        return cls(name=text(values.pop("name")), next_ms=int(values.pop("next_ms")),
                   payload=bytes(values.pop("payload", b"")),
                   every_ms=None if every is None else int(every),
                   cron=None if cron is None else text(cron), tz=None if tz is None else text(tz),
                   options={name: text(value) for name, value in values.items()})


@dataclass(frozen=True)
class Lane:
    """EMQ.LANES: one lane's waiting (`pending`) and running (`active`) jobs."""

    pending: int
    active: int


@dataclass(frozen=True)
class Finished:
    """EMQ.WAIT's answer: the job is `completed` (with its `result`, bytes or None),
    `dead` (with its last `error`) or `cancelled` (`error`: the cancel's reason)."""

    id: str
    state: str
    result: bytes | None = None
    error: str | None = None

    @property
    def completed(self) -> bool:
        return self.state == "completed"

    @property
    def dead(self) -> bool:
        return self.state == "dead"

    @property
    def cancelled(self) -> bool:
        return self.state == "cancelled"

    @classmethod
    def from_wait(cls, job_id: str, reply: Any) -> Finished:
        state, value = text(reply[0]), reply[1]
        if state == "completed":
            return cls(job_id, state, result=None if value is None else bytes(value))
        return cls(job_id, state, error=None if value is None else text(value))


@dataclass(frozen=True)
class QueueEvent:
    """One message of `emq:{QUEUE}:events` (protocol section 16): `name` (`added`,
    `claimed`, ...), the job's `id` (None for `paused` / `resumed`), `ts` (server ms) and
    the event's own `fields` (`token`, `value`, `failures`, `due_ms`, `error`, ...)."""

    name: str
    id: str | None
    ts: int
    fields: dict[str, Any]

    @classmethod
    def parse(cls, data: bytes | str) -> QueueEvent:
        fields = json.loads(data)
        return cls(fields.pop("event"), fields.pop("id", None), fields.pop("ts"), fields)


#: EMQ.METRICS's figures of a minute (ms, None in a minute without a claim or completion).
_TIMES = ("wait_p50", "wait_p95", "wait_p99", "run_p50", "run_p95", "run_p99")


@dataclass(frozen=True)
class Minute:
    """One minute of EMQ.METRICS: its start (server ms), the jobs completed, the failures
    (every FAIL) and the jobs that died in it, and the wait (claimable to claimed) and
    run (claimed to completed) percentiles, in ms, None without a claim (a completion)."""

    minute: int
    completed: int
    failures: int
    dead: int
    wait_p50: int | None
    wait_p95: int | None
    wait_p99: int | None
    run_p50: int | None
    run_p95: int | None
    run_p99: int | None

    @classmethod
    def from_reply(cls, reply: Any) -> Minute:
        values = as_map(reply)
        times = {name: None if values.get(name) is None else int(values[name])
                 for name in _TIMES}
        return cls(minute=int(values["minute"]), completed=int(values["completed"]),
                   failures=int(values["failures"]), dead=int(values["dead"]), **times)


@dataclass(frozen=True)
class FailVerdict:
    """EMQ.FAIL's reply: `dead` or `scheduled`, and the failures spent so far."""

    verdict: str
    failures: int

    @property
    def dead(self) -> bool:
        return self.verdict == "dead"


def job_options(*, id: str | None = None, delay_ms: int | None = None, at_ms: int | None = None,
                priority: int = 0, max_attempts: int | None = None,
                backoff: str | int | None = None, group: str | None = None) -> list[Any]:
    """EMQ.ADD's options as words (EMQ.FLOW's jobs take the same)."""
    argv: list[Any] = []
    if id is not None:
        argv += ["ID", raw_bytes(id)]
    if delay_ms is not None and at_ms is not None:
        raise ValueError("give delay_ms or at_ms, not both")
    if delay_ms is not None:
        argv += ["DELAY", delay_ms]
    if at_ms is not None:
        argv += ["AT", at_ms]
    if priority:
        argv += ["PRIORITY", priority]
    if max_attempts is not None:
        argv += ["MAXATTEMPTS", max_attempts]
    if backoff is not None:
        argv += ["BACKOFF", backoff]
    if group is not None:
        argv += ["GROUP", raw_bytes(group)]
    return argv


def _named(options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The job's id (the caller's, else a picked one) and the options that name it."""
    job_id = options.get("id")
    if job_id is None:
        job_id = pick_id()
    return job_id, {**options, "id": job_id}


def _single(command: Command) -> Generator[list[Command], list[Any], Any]:
    replies = yield [command]
    return expect(replies[0])


class QueueCommands:
    """Every operation on one queue, as `Operation`s. Holds no connection."""

    def __init__(self, name: str | bytes) -> None:
        key = raw_bytes(name)
        if not 0 < len(key) <= 256 or b"{" in key or b"}" in key:
            raise ValueError(f"invalid queue name {name!r}: 1..256 bytes without braces")
        self.key = key  # the bytes sent: a name shown as text (surrogateescape) round trips
        self.name = text(key)  # as shown
        self.prefix = b"emq:{" + key + b"}:"
        self.events_channel = self.prefix + b"events"  # the queue's events (Queue.events)

    # --- producing -----------------------------------------------------------------
    # Every ADD names its job: the caller's `id`, else one the client picks (pick_id)
    # before the first try, so the batch is `Retried` after a lost connection without
    # ever making a second job (an ADD of an existing id answers it unchanged).
    def add_command(self, payload: Any, *, id: str | None = None,
                    delay_ms: int | None = None, at_ms: int | None = None, priority: int = 0,
                    max_attempts: int | None = None, backoff: str | int | None = None,
                    group: str | None = None, unique: str | bytes | None = None,
                    unique_ttl_ms: int | None = None, replace: bool = False,
                    extend: bool = False, trace: str | None = None) -> Command:
        """EMQ.ADD's argv. `replace` / `extend` (the debounce, PROTOCOL.md 22.3) change the
        job still waiting under `unique`; `trace` is the producer's trace context
        (tracing.py puts it there)."""
        argv: list[bytes | str | int] = ["EMQ.ADD", self.key, payload_bytes(payload)]
        argv += job_options(id=id, delay_ms=delay_ms, at_ms=at_ms, priority=priority,
                            max_attempts=max_attempts, backoff=backoff, group=group)
        if trace is not None:
            argv += ["TRACE", trace]
        if unique is None and (unique_ttl_ms is not None or replace or extend):
            raise ValueError("unique_ttl_ms, replace and extend need unique")
        if unique is not None:
            argv += ["UNIQUE", raw_bytes(unique)]
            if unique_ttl_ms is not None:
                argv += ["TTL", unique_ttl_ms]
            if replace:
                argv += ["REPLACE"]
            if extend:
                argv += ["EXTEND"]
        return tuple(argv)

    def _adding(self, job_ids: list[str],
                commands: list[Command]) -> Generator[list[Command], list[Any], list[Any]]:
        """Send ADDs (or a FLOW) as a `Retried` batch; `ConnectionLost` names the jobs when
        the server stays away."""
        try:
            return (yield Retried(commands))
        except TRANSPORT_ERRORS as error:
            raise ConnectionLost(job_ids[0], False, error, job_ids) from error

    def add(self, payload: Any, *, trace: str | None = None, **options: Any) -> Operation[str]:
        """EMQ.ADD; returns the job's id (an existing id is returned unchanged). With
        `unique`, the id of the live job holding the key when there is one (`add_unique`
        says which); `replace` and `extend` debounce (PROTOCOL.md 22.3). Inside a
        `send {queue}` span, whose context the job carries, when tracing (tracing.py); a
        `trace` given is sent as it is instead (a context of the caller's own making)."""
        job_id, options = _named(options)
        with tracing.sending(self.name, [job_id], trace) as traced:
            command = self.add_command(payload, trace=traced.context, **options)
            reply = expect((yield from self._adding([job_id], [command]))[0])
            return text(reply[0] if isinstance(reply, list) else reply)

    def add_unique(self, payload: Any, key: str | bytes, *, ttl_ms: int | None = None,
                   trace: str | None = None, **options: Any) -> Operation[Added]:
        """EMQ.ADD ... UNIQUE key [TTL ttl-ms] [REPLACE] [EXTEND]: the job holding `key`, new
        or not (`verdict`: what happened to it). (An ADD sent again after a lost reply
        answers `added` False for the job the first try added.)"""
        job_id, options = _named(options)
        with tracing.sending(self.name, [job_id], trace) as traced:
            command = self.add_command(payload, unique=key, unique_ttl_ms=ttl_ms,
                                       trace=traced.context, **options)
            holder, verdict = expect((yield from self._adding([job_id], [command]))[0])
            return Added(text(holder), text(verdict) == "added", text(verdict))

    def add_json(self, value: Any, **options: Any) -> Operation[str]:
        """`add` with the value always as JSON (a str too becomes a JSON string)."""
        return (yield from self.add(json_bytes(value), **options))

    def add_many(self, jobs: Iterable[Any], *, trace: str | None = None,
                 **options: Any) -> Operation[list[str]]:
        """Many EMQ.ADDs in one pipeline. Each item is a payload or a `NewJob` with options
        of its own, which win over the shared `options` (an `id` among the shared ones
        is refused: it would name every job). Raises the first error reply, after every
        command was sent."""
        if options.get("id") is not None:
            raise ValueError("add_many takes an id per job (NewJob(payload, id=...)), "
                             "not one for all")
        chosen = [(job.payload, job.options) if isinstance(job, NewJob) else (job, {})
                   for job in jobs]
        if not chosen:
            return []
        named = [_named({**options, **own}) for _, own in chosen]
        ids = [job_id for job_id, _ in named]
        with tracing.sending(self.name, ids, trace) as traced:
            commands = [self.add_command(payload, **{"trace": traced.context, **job})
                        for (payload, _), (_, job) in zip(chosen, named, strict=True)]
            replies = yield from self._adding(ids, commands)
            return [text(expect(reply)) for reply in replies]

    def add_and_wait(self, payload: Any, *, timeout_ms: int, **options: Any) -> Operation[Any]:
        """Request/response over the queue: EMQ.ADD, then EMQ.WAIT for that job; the
        RESULT its handler returned (bytes, or None). Raises `JobDead` when the job is
        dead-lettered, `JobCancelled` when it was cancelled, `WaitTimeout` when it is not
        finished within `timeout_ms` (0 waits for ever): the job stays queued then. A lost
        connection is ridden out (the ADD sent again under the same id, the WAIT with the
        time left); past the queue's `reconnect_s`, `ConnectionLost` carries the job's id."""
        job_id = yield from self.add(payload, **options)
        finished = yield from self.wait(job_id, timeout_ms)
        if finished is None:
            raise WaitTimeout(job_id, timeout_ms)
        if finished.dead:
            raise JobDead(job_id, finished.error)
        if finished.cancelled:
            reason = "" if finished.error is None else f": {finished.error}"
            raise JobCancelled(f"job {job_id} was cancelled{reason}")
        return finished.result

    # --- reading and steering --------------------------------------------------------
    def wait(self, job_id: str, timeout_ms: int = 0) -> Operation[Finished | None]:
        """EMQ.WAIT: once the job is completed or dead, how it ended (`Finished`); None
        at the timeout (0 waits for ever). The server holds this connection meanwhile
        (the queue's connections have no `socket_timeout` unless given one, which must
        then be longer). A lost connection is ridden out: the WAIT is sent again with
        the time left; past the queue's `reconnect_s`, `ConnectionLost` names the job."""
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None

        def waiting() -> Retried:
            left = timeout_ms if deadline is None else max(
                1, math.ceil((deadline - time.monotonic()) * 1000))
            return Retried([("EMQ.WAIT", self.key, raw_bytes(job_id), left)], waiting)

        try:
            replies = yield waiting()
        except TRANSPORT_ERRORS as error:
            raise ConnectionLost(job_id, True, error) from error
        reply = expect(replies[0])
        return None if reply is None else Finished.from_wait(job_id, reply)

    def logs(self, job_id: str, start: int = 0, count: int | None = None) -> Operation[list[str]]:
        """EMQ.LOGS: the job's log lines, oldest first, as text (surrogateescape)."""
        argv: Command = ("EMQ.LOGS", self.key, raw_bytes(job_id))
        if start:
            argv += ("START", start)
        if count is not None:
            argv += ("COUNT", count)
        return [text(line) for line in (yield from _single(argv))]

    def get(self, job_id: str) -> Operation[JobInfo | None]:
        reply = yield from _single(("EMQ.GET", self.key, raw_bytes(job_id)))
        return None if reply is None else JobInfo.from_row(job_id, reply)

    def stats(self) -> Operation[Stats]:
        return Stats.from_reply((yield from _single(("EMQ.STATS", self.key))))

    def revive(self, job_id: str, reset: bool = False) -> Operation[None]:
        """EMQ.REVIVE: a dead job back to pending; `reset` gives it its whole budget."""
        argv: Command = ("EMQ.REVIVE", self.key, raw_bytes(job_id))
        yield from _single(argv + ("RESET",) if reset else argv)

    def remove(self, job_id: str) -> Operation[bool]:
        """EMQ.REMOVE: True when the job existed. An active job raises JobStateError."""
        return bool((yield from _single(("EMQ.REMOVE", self.key, raw_bytes(job_id)))))

    def cancel(self, job_id: str, reason: str | None = None) -> Operation[str | None]:
        """EMQ.CANCEL: ends a job that has not finished, for good (PROTOCOL.md 22.2); the
        state it was cancelled from (`pending`, `scheduled`, `waiting`, `active`), None
        for no such job. A running job's worker learns it at its next call and stops
        the handler. A finished job raises JobStateError."""
        argv: Command = ("EMQ.CANCEL", self.key, raw_bytes(job_id))
        reply = yield from _single(argv if reason is None else argv + ("REASON", reason))
        return None if reply is None else text(reply)

    def metrics(self, from_ms: int | None = None,
                to_ms: int | None = None) -> Operation[list[Minute]]:
        """EMQ.METRICS: the queue's closed minutes that begin between `from_ms` (default 0)
        and `to_ms` (default now), oldest first, within the last 72 hours."""
        argv: Command = ("EMQ.METRICS", self.key)
        if from_ms is not None:
            argv += ("FROM", from_ms)
        if to_ms is not None:
            argv += ("TO", to_ms)
        return [Minute.from_reply(entry) for entry in (yield from _single(argv))]

    def order_worker(self, name: str, order: str) -> Operation[None]:
        """EMQ.WORKER: ask the worker named `name` (its connections' name, as the
        dashboard's Workers page shows it) to `quiet` (claim nothing more from this
        queue), `stop` (finish what it holds and exit) or `run` (go on)."""
        if order not in ("quiet", "stop", "run"):
            raise ValueError("order must be quiet, stop or run")
        yield from _single(("EMQ.WORKER", self.key, order.upper(), raw_bytes(name)))

    def beat(self, name: str) -> Operation[str]:
        """EMQ.BEAT: what the worker named `name` is asked (`run`, `quiet`, `stop`); the
        Worker sends it every few seconds."""
        return text((yield from _single(("EMQ.BEAT", self.key, raw_bytes(name)))))

    def pause(self) -> Operation[None]:
        yield from _single(("EMQ.PAUSE", self.key))

    def resume(self) -> Operation[None]:
        yield from _single(("EMQ.RESUME", self.key))

    def dead(self, offset: int = 0, count: int = 100) -> Operation[list[JobInfo]]:
        """Dead letters, oldest death first: ZRANGE on the dead set, then the rows in one
        pipeline. A row deleted between the two round trips is left out."""
        if offset < 0 or count <= 0:
            raise ValueError("offset must be >= 0 and count > 0")
        ids = yield from _single(("ZRANGE", self.prefix + b"dead", offset, offset + count - 1))
        if not ids:
            return []
        rows = yield [("EMQ.GET", self.key, job_id) for job_id in ids]
        found = []
        for job_id, row in zip(ids, rows, strict=True):
            row = expect(row)
            if row is not None:
                found.append(JobInfo.from_row(text(job_id), row))
        return found

    def get_config(self, field: str | None = None) -> Operation[Any]:
        """EMQ.CONFIG GET: every setting's effective value ({name: value}, as text), or
        one setting's value when `field` is given."""
        if field is not None:
            return text((yield from _single(("EMQ.CONFIG", self.key, "GET", field))))
        reply = yield from _single(("EMQ.CONFIG", self.key, "GET"))
        return {name: text(value) for name, value in as_map(reply).items()}

    def set_config(self, **settings: int | str) -> Operation[None]:
        """EMQ.CONFIG SET: `set_config(max_attempts=5, backoff="exp:100:60000")`; all or
        nothing (one invalid value and none is written)."""
        if not settings:
            raise ValueError("give at least one setting")
        pairs = [part for item in settings.items() for part in item]
        yield from _single(("EMQ.CONFIG", self.key, "SET", *pairs))

    def queues(self) -> Operation[list[str]]:
        """EMQ.QUEUES: every queue on the server (not only this one), oldest first."""
        return [text(name) for name in (yield from _single(("EMQ.QUEUES",)))]

    def lanes(self) -> Operation[dict[str, Lane]]:
        """EMQ.LANES: each lane with waiting or running jobs, by group name."""
        reply = yield from _single(("EMQ.LANES", self.key))
        return {group: Lane(int(counts[0]), int(counts[1]))
                for group, counts in as_map(reply).items()}

    def set_lane_limit(self, group: str, limit: int) -> Operation[None]:
        """EMQ.LANE.LIMIT: at most `limit` of the lane's jobs run at once (0: no limit)."""
        yield from _single(("EMQ.LANE.LIMIT", self.key, raw_bytes(group), limit))

    def set_rate(self, max_claims: int, per_ms: int) -> Operation[None]:
        """EMQ.RATE: at most `max_claims` claims of the queue in any window of `per_ms`."""
        yield from _single(("EMQ.RATE", self.key, max_claims, per_ms))

    def clear_rate(self) -> Operation[None]:
        """EMQ.RATE ... OFF."""
        yield from _single(("EMQ.RATE", self.key, "OFF"))

    def set_lane_rate(self, group: str, max_claims: int, per_ms: int) -> Operation[None]:
        """EMQ.LANE.RATE: at most `max_claims` claims of the lane's jobs per `per_ms`."""
        yield from _single(("EMQ.LANE.RATE", self.key, raw_bytes(group), max_claims, per_ms))

    def clear_lane_rate(self, group: str) -> Operation[None]:
        yield from _single(("EMQ.LANE.RATE", self.key, raw_bytes(group), "OFF"))

    # --- flows -------------------------------------------------------------------------
    def flow(self, payload: Any, children: Iterable[Child], *, on_child_fail: str | None = None,
             trace: str | None = None, **options: Any) -> Operation[Flow]:
        """EMQ.FLOW: a parent in this queue that runs once its children are done. The
        parent is named as `add` names a job, so a FLOW sent again after a lost reply
        answers the flow the first try made. Every job of the flow carries the trace
        context of one `send {queue}` span (or `trace`, as `add`)."""
        parent_id, options = _named(options)
        with tracing.sending(self.name, [parent_id], trace) as traced:
            traces = [] if traced.context is None else ["TRACE", traced.context]
            argv: list[Any] = ["EMQ.FLOW", self.key, payload_bytes(payload),
                               *job_options(**options), *traces]
            if on_child_fail is not None:
                argv += ["ONCHILDFAIL", on_child_fail]
            for child in children:
                argv += ["CHILD", raw_bytes(child.queue), payload_bytes(child.payload),
                         *job_options(**child.options), *traces]
                if child.on_child_fail is not None:
                    argv += ["ONCHILDFAIL", child.on_child_fail]
                if child.under:
                    argv += ["UNDER", child.under]
            if argv.count("CHILD") == 0:
                raise ValueError("a flow needs at least one child")
            parent, ids = expect((yield from self._adding([parent_id], [tuple(argv)]))[0])
            return Flow(text(parent), [text(job_id) for job_id in ids])

    def children(self, job_id: str) -> Operation[list[ChildInfo] | None]:
        """EMQ.CHILDREN: a parent's children with their states and results (None: no
        such job). A parent's handler reads its children's results here."""
        reply = yield from _single(("EMQ.CHILDREN", self.key, raw_bytes(job_id)))
        if reply is None:
            return None
        return [ChildInfo(text(queue), text(child), text(state),
                          None if result is None else bytes(result))
                for queue, child, state, result in reply]

    # --- repeatable jobs -------------------------------------------------------------------
    def repeat(self, name: str, payload: Any, *, every_ms: int | None = None,
               cron: str | None = None, tz: str | None = None, **options: Any) -> Operation[int]:
        """EMQ.REPEAT: create or replace a schedule (`every_ms`, or `cron` [and `tz`]); the
        server adds one job a slot. `options`: priority, max_attempts, backoff, group.
        Returns its first slot (server ms)."""
        argv: list[Any] = ["EMQ.REPEAT", self.key, raw_bytes(name)]
        if (every_ms is None) == (cron is None):
            raise ValueError("give every_ms or cron")
        if every_ms is not None:
            if tz is not None:
                raise ValueError("tz goes with cron")
            argv += ["EVERY", every_ms]
        else:
            argv += ["CRON", cron] + ([] if tz is None else ["TZ", tz])
        unknown = set(options) - {"priority", "max_attempts", "backoff", "group"}
        if unknown:
            raise TypeError(f"repeat() got unexpected options {sorted(unknown)}")
        argv += [payload_bytes(payload), *job_options(**options)]
        return int((yield from _single(tuple(argv))))

    def delete_repeat(self, name: str) -> Operation[bool]:
        """EMQ.REPEAT.DEL: True when the schedule existed; the jobs it added stay."""
        return bool((yield from _single(("EMQ.REPEAT.DEL", self.key, raw_bytes(name)))))

    def repeats(self) -> Operation[list[Schedule]]:
        """EMQ.REPEATS: the queue's schedules, soonest first."""
        return [Schedule.from_reply(entry)
                for entry in (yield from _single(("EMQ.REPEATS", self.key)))]

    def promote(self, limit: int | None = None) -> Operation[int]:
        """EMQ.PROMOTE: due scheduled jobs into pending now; how many moved. The server
        does this by itself on time: this is for tests and tools."""
        argv: Command = ("EMQ.PROMOTE", self.key)
        return int((yield from _single(argv if limit is None else argv + ("LIMIT", limit))))

    def ping(self) -> Operation[None]:
        yield from _single(("PING",))

    # --- consuming -------------------------------------------------------------------
    def claim(self, lease_ms: int, count: int = 1, block_ms: int | None = None,
              reporter: Reporter | None = None, with_trace: bool = False) -> Operation[list[Job]]:
        """EMQ.CLAIM with COUNT: up to `count` jobs; `block_ms` parks until one is
        claimable (0 = forever). Always a list, empty when nothing came. (A Worker's
        jobs report through its `reporter`.) `with_trace` asks for each job's trace
        context too (`Job.trace`)."""
        argv: Command = ("EMQ.CLAIM", self.key, lease_ms, "COUNT", count)
        if block_ms is not None:
            argv += ("BLOCK", block_ms)
        if with_trace:
            argv += ("WITHTRACE",)
        reply = yield from _single(argv)
        return [Job.from_claim(entry, reporter) for entry in reply or ()]

    def complete(self, job: Job, result: Any = None) -> Operation[None]:
        argv: Command = ("EMQ.COMPLETE", self.key, raw_bytes(job.id), raw_bytes(job.token))
        encoded = result_bytes(result)
        yield from _single(argv if encoded is None else argv + ("RESULT", encoded))

    def fail(self, job: Job, error: str | None = None, *, max_attempts: int | None = None,
             backoff_ms: int | None = None) -> Operation[FailVerdict]:
        argv: list[bytes | str | int] = ["EMQ.FAIL", self.key, raw_bytes(job.id),
                                         raw_bytes(job.token)]
        if error is not None:
            argv += ["ERROR", error]
        if max_attempts is not None:
            argv += ["MAXATTEMPTS", max_attempts]
        if backoff_ms is not None:
            argv += ["BACKOFF", backoff_ms]
        verdict, failures = yield from _single(tuple(argv))
        return FailVerdict(text(verdict), int(failures))

    def requeue(self, job: Job, delay_ms: int | None = None) -> Operation[None]:
        """EMQ.REQUEUE: the job back without a failure; with `delay_ms` a snooze (it runs
        again after that long, spending no failure: PROTOCOL.md 22.1)."""
        argv: Command = ("EMQ.REQUEUE", self.key, raw_bytes(job.id), raw_bytes(job.token))
        yield from _single(argv if delay_ms is None else argv + ("DELAY", delay_ms))

    def progress(self, job: Job, value: Any) -> Operation[None]:
        """EMQ.PROGRESS: bytes and str as they are, anything else (a number, a dict) as
        JSON; at most 4 KiB."""
        yield from _single(("EMQ.PROGRESS", self.key, raw_bytes(job.id), raw_bytes(job.token),
                            payload_bytes(value)))

    def log(self, job: Job, line: Any) -> Operation[int]:
        """EMQ.LOG: one line (at most 4 KiB) to the job's log; how many lines it keeps."""
        return int((yield from _single(("EMQ.LOG", self.key, raw_bytes(job.id),
                                        raw_bytes(job.token), payload_bytes(line)))))

    def extend(self, job: Job, lease_ms: int) -> Operation[int]:
        """EMQ.EXTEND: the new lease deadline (server ms)."""
        return int((yield from _single(
            ("EMQ.EXTEND", self.key, raw_bytes(job.id), raw_bytes(job.token), lease_ms))))
