"""Where committed plans go to be kept, and how the commit path learns they are kept.

A `Sink` takes each committed plan as one record (`append`; an EXEC's plans as
one record, `append_batch`) and counts what it was handed in an offset
(`appended`). It says up to which offset its records are durable (`durable`):
the commit path (emqd/commit/path.py) releases a reply, an event or a wake-up only
once `durable` has reached the offset it waits for. A sink knows records and
offsets; it never knows a connection, a session or the server.

How durability is learnt is the sink's own business:

- the append-only file (persist/aof.py) learns it at once, from write(2) or
  fsync on the loop, in `flush` (and, under `everysec` / `no`, in `write_now`,
  which a reply may call to leave without waiting for the end of the loop
  iteration);
- a remote store learns it later, from the store's answer: its `flush` sends
  and returns, and when the answer comes it calls the `notify` it was given at
  `attach`, and the commit path releases what waits;
- `NullSink` (`--appendonly no`) keeps nothing: every record is durable as
  soon as it is appended, and nothing ever waits.

The commit path calls `flush` once per loop iteration with records appended
(Redis's beforeSleep), and again on `notify`. While the sink cannot keep
records (`failing`), the dispatcher refuses writes (MISCONF) and the commit
path retries `flush` every second.

A remote sink may also lose single records for good (`fallible`: the store
refused them, or never acknowledged them in time): `take_failed` names them,
and the commit path answers what waited for them with a retryable error
instead of its reply. And it may refuse a plan before it is applied
(`checks_plans`, `refusal`: a plan the store cannot take as one unit, such as
one that spans the cluster's hash slots).
"""

from __future__ import annotations

from collections.abc import Callable

from mypy_extensions import mypyc_attr

from emqd import clock
from emqd.commit.plan import Op, Plan
from emqd.config import Config
from emqd.errors import ReplyError


def _ignore() -> None:
    """The `notify` of a sink no commit path has attached to yet."""


@mypyc_attr(allow_interpreted_subclasses=True)  # the log's sink and the tests' are not compiled
class Sink:
    """The interface, and what a sink that needs nothing more inherits.

    `strict`: every reply waits for every record appended before it was made,
    reads too, so that no reply shows a write the sink could still lose (the
    file under `always`). `watches_applies`: the sink wants each plan's ops
    before they are applied (`before_apply`: a compaction keeps the old values
    of what changes).
    """

    def __init__(self) -> None:
        # False only for NullSink: the commit path then skips the sink altogether,
        # so that `--appendonly no` costs a job cycle nothing here.
        self.keeps = True
        self.appended = 0
        self.strict = False
        self.watches_applies = False
        self.fallible = False  # single records may fail for good (take_failed)
        self.checks_plans = False  # `refusal` may refuse a plan before it is applied
        self.failing: OSError | None = None  # why records cannot be kept now
        self.last_save_s = clock.now_ms() // 1000  # when all appended was last kept (LASTSAVE)
        self.notify: Callable[[], None] = _ignore

    def attach(self, notify: Callable[[], None]) -> None:
        """The commit path's: call `notify` when durability advanced (an asynchronous
        acknowledgement) or a flush is needed outside a commit (a retry to arm). A sink
        already failing (a directory that could not be fsynced) asks for one at once."""
        self.notify = notify
        if self.failing is not None:
            notify()

    @property
    def durable(self) -> int:
        return self.appended

    def reconfigure(self, config: Config) -> None:
        """CONFIG SET: the sink's own settings (the file's fsync policy), from now on."""

    def refusal(self, plan: Plan) -> ReplyError | None:
        """Why this plan cannot be kept as one unit (asked if `checks_plans`): the commit
        path then refuses it before anything is applied."""
        return None

    def resolved(self, offset: int) -> bool:
        """Whether the record at `offset` is settled, kept or failed (asked if `fallible`,
        for a record past `durable`: a remote sink settles its stores' records out of
        order, and one store's outage must not hold the others' answers)."""
        return offset <= self.durable

    def take_failed(self) -> list[int]:
        """The offsets of the records that failed for good since the last call (if
        `fallible`): what waited for them is answered with a retryable error."""
        return []

    def sweep_delay_ms(self, queue: bytes) -> int:
        """How much longer the stall sweep of `queue` must wait (0: it may run now). A
        remote store that could not be written for a while asks for that time again: a
        lease must not run out for time the store lost, while its holder's replies were
        held (a cluster's failover). A local file never asks."""
        return 0

    def before_apply(self, ops: list[Op]) -> None:
        """Called with a plan's ops before they change the keyspace (if `watches_applies`)."""

    def append(self, plan: Plan) -> None:
        """One plan as one record."""

    def append_batch(self, plans: list[Plan]) -> None:
        """Several plans as one record (an EXEC): all of them are kept, or none."""

    def write_now(self) -> bool:
        """Make what was appended durable now if that is cheap; True when `durable`
        reached `appended`. The file does a write(2) under `everysec`; a remote sink
        cannot, and answers False: the reply waits for `flush`."""
        return self.durable >= self.appended

    def flush(self) -> bool:
        """The end of a loop iteration: keep what was appended (synchronously, or start
        to); True when all of it is durable now."""
        return self.durable >= self.appended

    def save(self) -> bool:
        """Everything appended is kept when this returns True (SAVE, shutdown)."""
        return self.failing is None

    def close(self) -> bool:
        """Shutdown: keep everything appended (False if that failed), then let go."""
        return self.save()

    def info(self) -> dict[str, object]:
        """The sink's own fields of INFO's persistence section."""
        return {}


class NullSink(Sink):
    """`--appendonly no`: nothing is kept, so nothing waits. `appended` stays 0."""

    def __init__(self) -> None:
        super().__init__()
        self.keeps = False
