"""An in-memory stand-in for `Queue`, with emqd's fencing rules, for testing the Worker's
state machine without a server: tokens, leases, BLOCK, EMQSTALE, and an outage switch.

It keeps the rules the Worker relies on (section 5): CLAIM bumps the token and
grants a lease; COMPLETE/FAIL/REQUEUE/EXTEND (and a handler's PROGRESS/LOG)
compare the token and need the job active; `recover()` plays the stall sweep
(back to pending, token unchanged).
While `down` is set, every call raises redis-py's ConnectionError; while
`refusal` is set, every call raises it (a wrong password, a MISCONF). The next
`answers_lost` COMPLETEs are applied and then raise ConnectionError: a front
that applied one and died before answering.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from emqd.client.commands import FailVerdict, Job, JobInfo
from emqd.client.errors import StaleJob


@dataclass
class Row:
    id: str
    payload: bytes
    state: str = "pending"
    attempts: int = 0
    failures: int = 0
    deadline: float = 0.0
    result: Any = None
    last_error: str | None = None
    max_attempts: int = 3


@dataclass
class FakeQueue:
    name: str = "fake"
    url: str = "fake://"
    rows: dict[str, Row] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    down: bool = False
    refusal: BaseException | None = None
    attempts: int = 0  # calls made, refused ones included
    closed: bool = False
    answers_lost: int = 0

    def __post_init__(self) -> None:
        self.changed = asyncio.Event()

    # --- test controls ---------------------------------------------------------
    def put(self, *payloads: bytes, max_attempts: int = 3) -> list[str]:
        ids = []
        for payload in payloads:
            job_id = str(len(self.rows) + 1)
            self.rows[job_id] = Row(job_id, payload, max_attempts=max_attempts)
            self.pending.append(job_id)
            ids.append(job_id)
        self.changed.set()
        return ids

    def recover(self, job_id: str) -> None:
        """What the server's stall sweep does to an expired lease."""
        row = self.rows[job_id]
        row.state = "pending"
        self.pending.insert(0, job_id)
        self.changed.set()

    def verbs(self, name: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == name]

    # --- the Queue surface the Worker uses ------------------------------------------
    def _check_up(self) -> None:
        self.attempts += 1
        if self.down:
            raise RedisConnectionError("fake server is down")
        if self.refusal is not None:
            raise self.refusal

    def _held(self, job: Job) -> Row:
        row = self.rows.get(job.id)
        if row is None or row.attempts == 0:
            raise StaleJob("EMQSTALE job gone")
        if str(row.attempts) != job.token:
            raise StaleJob("EMQSTALE token mismatch")
        if row.state != "active":
            raise StaleJob("EMQSTALE job not active")
        return row

    async def ping(self) -> None:
        self._check_up()

    async def claim(self, lease_ms: int, count: int = 1, block_ms: int | None = None,
                    with_trace: bool = False) -> list[Job]:
        self._check_up()
        self.calls.append(("claim", count, block_ms))
        deadline = time.monotonic() + (block_ms or 0) / 1000
        while not self.pending and time.monotonic() < deadline:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
            self._check_up()
        jobs = []
        while self.pending and len(jobs) < count:
            row = self.rows[self.pending.pop(0)]
            row.attempts += 1
            row.state = "active"
            row.deadline = time.monotonic() + lease_ms / 1000
            jobs.append(Job(row.id, row.payload, str(row.attempts), row.failures))
        return jobs

    async def extend(self, job: Job, lease_ms: int) -> int:
        self._check_up()
        self.calls.append(("extend", job.id, job.token))
        row = self._held(job)
        row.deadline = time.monotonic() + lease_ms / 1000
        return int(row.deadline * 1000)

    async def complete(self, job: Job, result: Any = None) -> None:
        self._check_up()
        self.calls.append(("complete", job.id, job.token, result))
        row = self._held(job)
        row.state, row.result = "completed", result
        if self.answers_lost:
            self.answers_lost -= 1
            raise RedisConnectionError("the answer was lost")

    async def get(self, job_id: str) -> JobInfo | None:
        self._check_up()
        self.calls.append(("get", job_id))
        row = self.rows.get(job_id)
        if row is None:
            return None
        return JobInfo(row.id, row.state, row.payload, {"attempts": str(row.attempts).encode()})

    async def fail(self, job: Job, error: str | None = None, *, max_attempts: int | None = None,
                   backoff_ms: int | None = None) -> FailVerdict:
        self._check_up()
        self.calls.append(("fail", job.id, job.token, error, max_attempts, backoff_ms))
        row = self._held(job)
        row.failures += 1
        row.last_error = error
        cap = max_attempts or row.max_attempts
        row.state = "dead" if row.failures >= cap else "scheduled"
        return FailVerdict(row.state, row.failures)

    async def progress(self, job: Job, value: Any) -> None:
        self._check_up()
        self.calls.append(("progress", job.id, job.token, value))
        self._held(job)

    async def log(self, job: Job, line: bytes | str) -> int:
        self._check_up()
        self.calls.append(("log", job.id, job.token, line))
        self._held(job)
        return len(self.verbs("log"))

    async def requeue(self, job: Job) -> None:
        self._check_up()
        self.calls.append(("requeue", job.id, job.token))
        row = self._held(job)
        row.state = "pending"
        self.pending.insert(0, job.id)
        self.changed.set()

    async def aclose(self) -> None:
        self.closed = True
