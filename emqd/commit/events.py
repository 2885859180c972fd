"""What happened to jobs: each plan's transitions, for the metrics and for Pub/Sub.

A verb's plan carries, beside its ops, the transitions it makes, in plan
order, as `Event` tuples:

    (name, queue, id, ts, extra)

- `name`: one of the names below;
- `queue`: the queue name (bytes);
- `id`: the job id (bytes), `b""` for a queue-wide event (paused, resumed);
- `ts`: the plan's `now`, wall-clock milliseconds;
- `extra`: None, or a dict of the event's own fields (str -> bytes | int),
  in the order they are published: `claimed` has `token` and `wait_ms`
  (claim time minus `ready_ms`, else `created_ms`: from when the job could be
  claimed), `completed` has `duration_ms` (finish time
  minus `claimed_ms`), `retry` has `failures` and `due_ms`, `dead` has
  `error`, `progress` has `value`, `snoozed` has `due_ms`, `cancelled` has
  `reason` when one was given, `debounced` has `due_ms` when the job waits in
  `scheduled`.

The commit path (emqd/commit/path.py) hands a committed plan's events to every
listener (`Commit.listen`), after the plan is applied and handed to the sink, so a
listener sees only what happened (a refused verb has no plan and no events).
Listeners run on the event loop and must be cheap: the metrics count and
sample, Pub/Sub formats a message only for a channel someone listens to.

Events are tuples, not objects: the hot verbs make one per job they move, and a
tuple costs a third of a slotted instance to build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

Event = tuple[str, bytes, bytes, int, "dict[str, Any] | None"]  # (name, queue, id, ts, extra)
Listener = Callable[[list[Event]], None]

ADDED: Final = "added"
CLAIMED: Final = "claimed"
PROGRESS: Final = "progress"
COMPLETED: Final = "completed"
RETRY: Final = "retry"
DEAD: Final = "dead"
STALLED: Final = "stalled"  # a counted stall sent back to pending (one that dies is `dead`)
RECOVERED: Final = "recovered"  # back to pending uncounted: a lease exempt by the epoch, a REQUEUE
SNOOZED: Final = "snoozed"  # given back by its holder to run after a delay (REQUEUE ... DELAY)
CANCELLED: Final = "cancelled"  # ended by EMQ.CANCEL, running or not
DEBOUNCED: Final = "debounced"  # a waiting unique job changed by a later ADD (REPLACE, EXTEND)
REVIVED: Final = "revived"
PROMOTED: Final = "promoted"
REMOVED: Final = "removed"
PAUSED: Final = "paused"
RESUMED: Final = "resumed"
