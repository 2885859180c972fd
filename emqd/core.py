"""What every command reaches: the settings, the keyspace, the commit path, the epoch.

One `Core` per server, built by `serve/lifecycle.py` (and by tests, alone, with a store
in memory and nothing kept) and reached through each `Session` as
`session.core`; there is no module-level mutable server. It holds, each with
one job:

- `config`, the settings of the moment (CONFIG SET replaces it: `reconfigure`);
- `keyspace`, the store, and `commit`, the one way a plan gets into it and into
  the sink (emqd/commit/path.py), with `dues`, what housekeeping learns from it;
- `run_id`, the epoch every lease this process grants carries;
- `stats`, what the server counts about itself (emqd/serve/server_stats.py);
- `history`, what the metrics history sees of each queue's minute in progress
  (emqd/commit/history.py), until housekeeping closes it;
- `clients`, the sessions of the connected clients (`Session`, below: each
  reaches its core, so both are here), and `pubsub`, who listens to what
  (emqd/sessions/pubsub.py);
- `info`, the sections INFO gathers from the parts that have fields of their
  own (housekeeping, the listeners, the sink).

The parts that keep a setting of their own are told of a CONFIG SET by
`reconfigure`: the store's encoding limits, the logger and the sink directly,
and whatever registered with `on_reconfigure` (housekeeping).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any, Final, Protocol

from emqd import clock
from emqd.commit.dues import Dues
from emqd.commit.history import History
from emqd.commit.path import Commit
from emqd.commit.sink import NullSink, Sink
from emqd.config import LOG_LEVELS, Config
from emqd.serve.process_memory import rss_bytes
from emqd.serve.server_stats import Stats
from emqd.sessions.pubsub import Deliver, PubSub, Subscriptions, nowhere
from emqd.store.keyspace import Keyspace
from emqd.wire.output_limit import OutputLimit

Reconfigured = Callable[[Config, Config], None]  # (old, new)


class Router(Protocol):
    """The seam before dispatch: where a request runs, decided before it is run.

    A server may have one (cluster mode's: emqd/cluster/router.py); the
    dispatcher asks it first, and without one every request runs here.
    """

    def route(self, session: Session, row: Any, argv: list[bytes]) -> Any:
        """None: here; else the reply (a refusal, or a `Later`)."""

    def forwards(self, session: Session, argv: list[bytes]) -> bool:
        """Whether `argv` would be sent on at once, where it runs known (a pipeline
        then goes on behind the requests sent on before it)."""

    def forget(self, session: Session) -> None:
        """The client left."""

    def peers(self) -> list[bytes]:
        """The addresses of the processes requests are routed among, this one's first
        (EMQ.FRONTS)."""


InfoFields = Callable[[], dict[str, object]]


def normal_limit(config: Config) -> OutputLimit | None:
    if not (config.normal_hard_limit or config.normal_soft_limit):
        return None
    return OutputLimit(config.normal_hard_limit, config.normal_soft_limit,
                       config.normal_soft_seconds)


def new_run_id() -> str:
    """40 hex characters, drawn at every start, like Redis's run_id."""
    return secrets.token_hex(20)


def _no_shutdown() -> None:
    """SHUTDOWN on a core no server runs (tests): nothing to stop."""


class Core:
    def __init__(self, config: Config, keyspace: Keyspace | None = None,
                 sink: Sink | None = None, stats: Stats | None = None,
                 deliver: Deliver = nowhere, run_id: str | None = None,
                 shutdown: Callable[[], None] = _no_shutdown, router: Router | None = None,
                 epochs: dict[bytes, bytes] | None = None) -> None:
        self.config = config
        self.keyspace = keyspace if keyspace is not None else Keyspace()
        self._set_limits(config)
        self.stats = stats if stats is not None else Stats()
        self.history = History()  # fed by the commit path's listener (serve/lifecycle.py)
        self.dues = Dues(sweeping=bool(config.stalled_interval))
        self.commit = Commit(self.keyspace, sink if sink is not None else NullSink(), self.dues)
        self.run_id = run_id or new_run_id()
        self.run_id_bytes = self.run_id.encode()
        self.started_ms = clock.now_ms()
        self.clients: dict[int, Session] = {}
        self.pubsub = PubSub(deliver)  # channels and patterns -> sessions; publish() from anywhere
        # `client-output-buffer-limit normal`, or None when both its limits are 0
        # (the default): a connection checks it after every write when set.
        self.normal_limit = normal_limit(config)
        # INFO: section name -> callables adding fields to it (housekeeping adds
        # its `housekeeping_*` counters to "stats", the server `blocked_clients`
        # to "clients").
        self.info: dict[str, list[InfoFields]] = {}
        self.request_shutdown = shutdown  # SHUTDOWN: the server stops as on SIGTERM
        self._reconfigured: list[Reconfigured] = []
        # INFO's used_memory is the process as it started (its resident size now, before
        # the log loads) plus the keyspace's bytes (store/sizes.py); `maxmemory` bounds
        # it (0: no limit), kept here from the Config for the dispatcher's check.
        self.memory_startup = rss_bytes()
        self.memory_peak = self.memory_startup
        self.maxmemory = config.maxmemory
        # The router, if any, decides where each request runs before dispatch (`Router`);
        # `epochs`, if given, are the queues this process holds, each with the epoch of
        # the leases granted on its jobs (a router's process holds some queues, each
        # under a term of its own: emqd/cluster/front.py). Without them every queue is
        # here, its epoch `run_id`.
        self.router = router
        self.epochs = epochs

    def epoch_of(self, queue: bytes) -> bytes:
        """The epoch of the leases granted on `queue`'s jobs now (protocol section 6.1)."""
        epochs = self.epochs
        if epochs is None:
            return self.run_id_bytes
        return epochs.get(queue, self.run_id_bytes)

    def holds(self, queue: bytes) -> bool:
        """Whether `queue` is this process's now: always without `epochs`; with them,
        while it has an epoch here (a queue let go or lost is not)."""
        epochs = self.epochs
        return epochs is None or queue in epochs

    @property
    def sink(self) -> Sink:
        return self.commit.sink

    def add_info(self, section: str, fields: InfoFields) -> None:
        """INFO's `section` also shows what `fields` returns, each time it is asked."""
        self.info.setdefault(section, []).append(fields)

    # --- memory ------------------------------------------------------------------------
    def used_memory(self) -> int:
        """INFO's used_memory (docs/SERVER.md, Memory); its peak follows it."""
        used = self.memory_startup + self.keyspace.used
        if used > self.memory_peak:
            self.memory_peak = used
        return used

    def out_of_memory(self) -> bool:
        """Past `maxmemory`: commands that add data are refused (-OOM)."""
        limit = self.maxmemory
        return limit > 0 and self.used_memory() > limit

    # --- CONFIG SET and CONFIG RESETSTAT ---------------------------------------------
    def on_reconfigure(self, told: Reconfigured) -> None:
        """`told(old, new)` after each CONFIG SET, after the core's own parts were told."""
        self._reconfigured.append(told)

    def reconfigure(self, changes: dict[str, Any]) -> None:
        """Settings changed at run time (CONFIG SET, already validated): a new Config
        replaces the old, and the parts that keep a setting of their own are told."""
        old = self.config
        new = self.config = dataclasses.replace(old, **changes)
        self._set_limits(new)
        self.normal_limit = normal_limit(new)
        self.maxmemory = new.maxmemory
        if new.loglevel != old.loglevel:
            logging.getLogger("emqd").setLevel(LOG_LEVELS[new.loglevel])
        self.commit.sink.reconfigure(new)
        self.dues.set_sweeping(bool(new.stalled_interval))
        for told in self._reconfigured:
            told(old, new)

    def _set_limits(self, config: Config) -> None:
        """The store's copy of Redis's encoding thresholds, read at every write."""
        limits = self.keyspace.limits
        limits.hash_entries = config.hash_max_listpack_entries
        limits.hash_value = config.hash_max_listpack_value
        limits.zset_entries = config.zset_max_listpack_entries
        limits.zset_value = config.zset_max_listpack_value


# --- a client ----------------------------------------------------------------------
_ids: Final = itertools.count(1)


class Session:
    """One client's state, as commands see it: protocol version, auth, MULTI, name, Pub/Sub.

    No sockets here: the connection protocol owns one `Session` and hands it to
    the dispatcher with every request, so commands can be run and tested without
    a network. It is defined beside the `Core` it reaches (`session.core`), which
    holds the sessions in turn (`clients`, `Router`): one module, no import circle.
    """

    __slots__ = (
        "core",
        "id",
        "resp",
        "authenticated",
        "name",
        "lib_name",
        "lib_ver",
        "multi",
        "multi_error",
        "in_exec",
        "waking",
        "addr",
        "laddr",
        "created_ms",
        "last_ms",
        "last_command",
        "close_after_reply",
        "log_mark",
        "tells",
        "pubsub",
        "forwarded",
        "challenge",
    )

    def __init__(self, core: Core, addr: str = "", laddr: str = "") -> None:
        self.core = core
        self.id = next(_ids)
        self.lib_name = b""
        self.lib_ver = b""
        self.in_exec = False  # blocking commands do not block inside EXEC
        self.waking = False  # its parked request runs again (a watched key was written)
        self.addr = addr
        self.laddr = laddr
        self.created_ms = 0
        self.last_ms = 0  # when the last command arrived (CLIENT LIST idle=)
        self.last_command = "NULL"  # its full name (CLIENT LIST cmd=)
        self.close_after_reply = False  # QUIT
        # The sink's `appended` after this client's last write: its replies wait for it
        # (emqd/commit/path.py `send`).
        self.log_mark = 0
        # The record the reply to the request being run tells of (0: none): its own
        # write's, or, when the router ties its reply to its queue, the newest of that
        # queue's (emqd/commit/path.py, the rule). Set by the connection before each
        # request, then by the commit (dispatch.py) and the router.
        self.tells = 0
        # Its channels and patterns while it listens to any (emqd/sessions/pubsub.py);
        # None for every other client, which is all the dispatcher tests.
        self.pubsub: Subscriptions | None = None
        # Another process's router sends its clients' requests on this connection
        # (EMQ.FRONT, cluster mode); the router here never sends them on again.
        self.forwarded = False
        self.challenge = b""  # the nonce of its EMQ.FRONT CHALLENGE (emqd/commands/fronts.py)
        self.reset()

    def reset(self) -> None:
        """A fresh connection's state (RESET): RESP2, no name, no MULTI, password owed."""
        self.resp = 2
        self.authenticated = not self.core.config.requirepass
        self.name = b""
        self.multi: list[list[bytes]] | None = None  # queued commands while in MULTI
        self.multi_error = False  # a queued command was refused: EXEC aborts
