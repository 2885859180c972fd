"""What the server counts about itself, for INFO's `# Stats` and /metrics.

One `Stats` per server, reached as `Core.stats`. CONFIG RESETSTAT (`reset`)
sets INFO's counters back to 0; what /metrics shows as Prometheus counters
(the calls per command, the histograms) only grows, as a process's counters do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from emqd.serve.auth_failures import AuthFailures
from emqd.serve.histogram import Histogram
from emqd.serve.loop_lag import LoopLag

# The log's fsyncs take from microseconds to seconds (a disk that stalls).
FSYNC_BOUNDS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Tally:
    """How many times a command ran. A counter object per name, so that a call costs
    a dict read and an integer add, where an int in the dict cost a read, a write
    and a boxed int (~30 ns of a PING)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


@dataclass(slots=True)
class Counters:
    """What housekeeping (emqd/serve/housekeeping.py) adds to INFO's `# Stats` section."""

    promoted: int = 0  # jobs promoted
    stall_recovered: int = 0  # expired leases returned to pending by the sweep
    stall_dead: int = 0  # expired leases dead-lettered by the sweep
    stall_quarantined: int = 0  # corrupt rows the sweep dead-lettered (stalled_check.slice_args)
    trimmed: int = 0  # finished rows deleted by retention slices
    repeated: int = 0  # jobs added by schedules
    released: int = 0  # lanes back in the ring when their rate window had room
    refused: int = 0  # slices refused (a corrupt row); each retried later
    last_refusal: str = ""

    def reset(self) -> None:
        """CONFIG RESETSTAT: every field back to its default, whatever fields there are."""
        for field in fields(self):
            setattr(self, field.name, field.default)

    def info(self) -> dict[str, object]:
        return {f"housekeeping_{field.name}": getattr(self, field.name) for field in fields(self)}


class Stats:
    def __init__(self) -> None:
        self.total_commands = 0
        self.command_calls: dict[str, Tally] = {}  # full name -> its calls (/metrics)
        self.total_connections = 0
        self.rejected_connections = 0  # refused at maxclients
        self.output_limit_disconnections = 0  # clients closed by emqd/wire/delivery.py
        # How late the event loop runs (emqd/serve/loop_lag.py): INFO's latest and
        # worst lag, and a cumulative histogram for /metrics.
        self.loop_lag = LoopLag()
        self.fsyncs = Histogram(FSYNC_BOUNDS_S)  # each fsync of the log (/metrics)
        self.housekeeping = Counters()
        # refused passwords (emqd/serve/auth_failures.py): kept by CONFIG RESETSTAT, as in Redis 7.2
        self.auth_failures = AuthFailures()

    def reset(self) -> None:
        """CONFIG RESETSTAT: INFO's counters start again from 0 (its `stats` section).

        /metrics keeps its own counters (per-command calls, the histograms, the
        jobs' counters in the store): a Prometheus counter only goes back to 0
        with the process.
        """
        self.total_commands = 0
        self.total_connections = 0
        self.rejected_connections = 0
        self.output_limit_disconnections = 0
        self.loop_lag.reset_worst()
        self.housekeeping.reset()
