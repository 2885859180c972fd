"""The client's sans-IO core: EMQ commands built as argv, replies parsed into values.

Every queue operation is written once here, as a generator (an `Operation`)
that yields a batch of commands (one pipeline round trip) and receives that
batch's replies, as values or as `ResponseError` instances, and finally
returns the result. `Queue` (asyncio) and `SyncQueue` (blocking) only drive
these generators over a socket (emqd/client/queue.py), so the two share every
byte they send and every rule they parse by; tests drive them with canned
replies and no socket at all.

Ids and tokens are `str` (decoded with `surrogateescape`, so any bytes round
trip exactly; a token is compared by the server as bytes); payloads and
results are `bytes`.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.exceptions import ResponseError

from emqd.client.errors import translate

T = TypeVar("T")
Command = tuple[bytes | str | int, ...]
#: Yields a batch of commands, receives their replies, returns the result.
Operation = Generator[list[Command], list[Any], T]

ADD_OPTIONS = ("id", "delay_ms", "at_ms", "priority", "max_attempts", "backoff", "group")


def text(raw: bytes | str) -> str:
    """Bytes from the wire as `str`; `raw_bytes` gives exactly the same bytes back."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape")


def raw_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def payload_bytes(payload: bytes | str) -> bytes:
    """A payload as sent: bytes as they are, text as UTF-8; anything else is an error
    (use `add_json` for objects) rather than a silent `str()`."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    raise TypeError(f"payload must be bytes or str, not {type(payload).__name__}; "
                    "use add_json for other objects")


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def result_bytes(value: Any) -> bytes | None:
    """A handler's return value as COMPLETE's RESULT: None sends no RESULT; bytes and
    str go as they are; anything else as JSON."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json_bytes(value)


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


@dataclass(frozen=True)
class Job:
    """A claimed job as the handler sees it: CLAIM's `[id, token, payload, failures]`."""

    id: str
    payload: bytes
    token: str
    failures: int = 0

    def json(self) -> Any:
        return json.loads(self.payload)

    @classmethod
    def from_claim(cls, entry: list[Any]) -> Job:
        job_id, token, payload, failures = entry
        return cls(text(job_id), bytes(payload), text(token), int(failures))


_INT_FIELDS = ("attempts", "failures", "stalled", "max_attempts", "priority",
               "created_ms", "claimed_ms", "finished_ms")


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
        """How many times the job was claimed (its fencing token as a number)."""
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
                "completed_total", "failed_total", "trimmed_dead", "paused")


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

    @classmethod
    def from_reply(cls, reply: Any) -> Stats:
        values = as_map(reply)
        return cls(**{name: int(values.get(name, 0)) for name in STATS_FIELDS})


@dataclass(frozen=True)
class FailVerdict:
    """EMQ.FAIL's reply: `dead` or `scheduled`, and the failures spent so far."""

    verdict: str
    failures: int

    @property
    def dead(self) -> bool:
        return self.verdict == "dead"


def _single(command: Command) -> Generator[list[Command], list[Any], Any]:
    replies = yield [command]
    return expect(replies[0])


class QueueCommands:
    """Every operation on one queue, as `Operation`s. Holds no connection."""

    def __init__(self, name: str) -> None:
        if not name or "{" in name or "}" in name:
            raise ValueError(f"invalid queue name {name!r}: 1..256 bytes without braces")
        self.name = name
        self.prefix = f"emq:{{{name}}}:"

    # --- producing -----------------------------------------------------------------
    def add_command(self, payload: bytes | str, *, id: str | None = None,
                    delay_ms: int | None = None, at_ms: int | None = None, priority: int = 0,
                    max_attempts: int | None = None, backoff: str | int | None = None,
                    group: str | None = None) -> Command:
        argv: list[bytes | str | int] = ["EMQ.ADD", self.name, payload_bytes(payload)]
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
        return tuple(argv)

    def add(self, payload: bytes | str, **options: Any) -> Operation[str]:
        """EMQ.ADD; returns the job's id (an existing id is returned unchanged)."""
        return text((yield from _single(self.add_command(payload, **options))))

    def add_json(self, value: Any, **options: Any) -> Operation[str]:
        return (yield from self.add(json_bytes(value), **options))

    def add_many(self, jobs: Iterable[bytes | str | Mapping[str, Any]],
                 **options: Any) -> Operation[list[str]]:
        """Many EMQ.ADDs in one pipeline. Each item is a payload, or a mapping with
        `payload` and any of add's options (which win over the shared `options`).
        Raises the first error reply, after every command was sent."""
        commands = []
        for job in jobs:
            spec = dict(job) if isinstance(job, Mapping) else {"payload": job}
            merged = {**options, **spec}
            commands.append(self.add_command(merged.pop("payload"), **merged))
        if not commands:
            return []
        replies = yield commands
        return [text(expect(reply)) for reply in replies]

    # --- reading and steering --------------------------------------------------------
    def get(self, job_id: str) -> Operation[JobInfo | None]:
        reply = yield from _single(("EMQ.GET", self.name, raw_bytes(job_id)))
        return None if reply is None else JobInfo.from_row(job_id, reply)

    def stats(self) -> Operation[Stats]:
        return Stats.from_reply((yield from _single(("EMQ.STATS", self.name))))

    def revive(self, job_id: str, reset: bool = False) -> Operation[None]:
        """EMQ.REVIVE: a dead job back to pending; `reset` gives it its whole budget."""
        argv: Command = ("EMQ.REVIVE", self.name, raw_bytes(job_id))
        yield from _single(argv + ("RESET",) if reset else argv)

    def remove(self, job_id: str) -> Operation[bool]:
        """EMQ.REMOVE: True when the job existed. An active job raises JobStateError."""
        return bool((yield from _single(("EMQ.REMOVE", self.name, raw_bytes(job_id)))))

    def pause(self) -> Operation[None]:
        yield from _single(("EMQ.PAUSE", self.name))

    def resume(self) -> Operation[None]:
        yield from _single(("EMQ.RESUME", self.name))

    def dead(self, offset: int = 0, count: int = 100) -> Operation[list[JobInfo]]:
        """Dead letters, oldest death first: ZRANGE on the dead set, then the rows in one
        pipeline. A row deleted between the two round trips is left out."""
        if offset < 0 or count <= 0:
            raise ValueError("offset must be >= 0 and count > 0")
        ids = yield from _single(("ZRANGE", self.prefix + "dead", offset, offset + count - 1))
        if not ids:
            return []
        rows = yield [("EMQ.GET", self.name, job_id) for job_id in ids]
        found = []
        for job_id, row in zip(ids, rows, strict=True):
            row = expect(row)
            if row is not None:
                found.append(JobInfo.from_row(text(job_id), row))
        return found

    def ping(self) -> Operation[None]:
        yield from _single(("PING",))

    # --- consuming -------------------------------------------------------------------
    def claim(self, lease_ms: int, count: int = 1,
              block_ms: int | None = None) -> Operation[list[Job]]:
        """EMQ.CLAIM with COUNT: up to `count` jobs; `block_ms` parks until one is
        claimable (0 = forever). Always a list, empty when nothing came."""
        argv: Command = ("EMQ.CLAIM", self.name, lease_ms, "COUNT", count)
        if block_ms is not None:
            argv += ("BLOCK", block_ms)
        reply = yield from _single(argv)
        return [Job.from_claim(entry) for entry in reply or ()]

    def complete(self, job: Job, result: Any = None) -> Operation[None]:
        argv: Command = ("EMQ.COMPLETE", self.name, raw_bytes(job.id), raw_bytes(job.token))
        encoded = result_bytes(result)
        yield from _single(argv if encoded is None else argv + ("RESULT", encoded))

    def fail(self, job: Job, error: str | None = None, *, max_attempts: int | None = None,
             backoff_ms: int | None = None) -> Operation[FailVerdict]:
        argv: list[bytes | str | int] = ["EMQ.FAIL", self.name, raw_bytes(job.id),
                                         raw_bytes(job.token)]
        if error is not None:
            argv += ["ERROR", error]
        if max_attempts is not None:
            argv += ["MAXATTEMPTS", max_attempts]
        if backoff_ms is not None:
            argv += ["BACKOFF", backoff_ms]
        verdict, failures = yield from _single(tuple(argv))
        return FailVerdict(text(verdict), int(failures))

    def requeue(self, job: Job) -> Operation[None]:
        yield from _single(("EMQ.REQUEUE", self.name, raw_bytes(job.id), raw_bytes(job.token)))

    def extend(self, job: Job, lease_ms: int) -> Operation[int]:
        """EMQ.EXTEND: the new lease deadline (server ms)."""
        return int((yield from _single(
            ("EMQ.EXTEND", self.name, raw_bytes(job.id), raw_bytes(job.token), lease_ms))))
