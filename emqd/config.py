"""Every setting of the server, with its default, in one frozen dataclass.

`cli.py` fills it from flags and `EMQD_*` environment variables; everything
else only reads it. Queue settings here are the defaults a queue's own
`EMQ.CONFIG` overrides.

Being frozen, a Config never changes under a reader. `CONFIG SET` changes a
setting by building a new one (`Core.reconfigure`), so each reader
sees the settings of the moment it reads `core.config`: a verb reads it at
every call, and the few parts that keep a setting of their own (the log's
fsync policy, housekeeping's sweep, the store's encoding limits) are told.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

# --loglevel's names -> the logging levels they set.
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


@dataclass(frozen=True, slots=True)
class Config:
    bind: str = "127.0.0.1"
    port: int = 6390  # 0 = no plain port (TLS only)
    # TLS, with Redis's option names; tls_port 0 = no TLS port.
    tls_port: int = 0
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_cert_file: str | None = None  # the CA that signs the clients' certificates
    tls_auth_clients: str = "yes"  # yes | no | optional: must a client show a certificate
    http_port: int = 6391  # the dashboard and /metrics, on the same --bind; 0 = off
    # The HTTP side's own limits (emqd/http/gate.py), so that it can never take the
    # queue port's descriptors: its connections at once (the next get 503), and how
    # long a connection may take to send its request head (ms; then 408 and closed).
    http_maxclients: int = 64
    http_head_timeout_ms: int = 10000
    dir: str = "."
    appendonly: bool = True
    appendfsync: str = "everysec"  # always | everysec | no
    aof_rewrite_min_size: int = 64 * 1024 * 1024
    requirepass: str | None = None
    # Redis's memory limit (bytes; 0 = none) on INFO's used_memory: past it, commands
    # that add data are refused (-OOM); emqd never evicts (docs/SERVER.md, Memory).
    maxmemory: int = 0
    maxmemory_policy: str = "noeviction"
    stalled_interval: int = 1000  # ms; 0 = no stall sweep
    max_payload: int = 16 * 1024 * 1024
    maxclients: int = 10000
    loglevel: str = "info"  # debug | info | warning
    # Redis's `client-output-buffer-limit pubsub 32mb 8mb 60`: a subscriber
    # with this many bytes unsent is closed; over the soft limit for longer
    # than the seconds, too (0 = no limit). emqd/wire/output_limit.py.
    pubsub_hard_limit: int = 32 * 1024 * 1024
    pubsub_soft_limit: int = 8 * 1024 * 1024
    pubsub_soft_seconds: int = 60
    # Redis's `client-output-buffer-limit normal 0 0 0`: off by default, as in
    # Redis, because a client that does not read already costs little (a
    # connection stops running its requests once its replies back up:
    # emqd/wire/protocol.py); set, it closes such a client.
    normal_hard_limit: int = 0
    normal_soft_limit: int = 0
    normal_soft_seconds: int = 0
    # Redis's encoding thresholds (OBJECT ENCODING, HSCAN/ZSCAN in one call):
    # the store holds them in `Keyspace.limits`, read at every write.
    hash_max_listpack_entries: int = 512
    hash_max_listpack_value: int = 64
    zset_max_listpack_entries: int = 128
    zset_max_listpack_value: int = 64
    # Queue defaults (protocol section 6.3).
    max_attempts: int = 3
    backoff: str = "fixed:1000"
    max_stalled: int = 2
    keep_completed: int = 1000
    keep_dead: int = 10000
    lane_limit: int = 1
    keep_log_lines: int = 100  # EMQ.LOG keeps a job's newest lines (0: none)
    keep_completed_ms: int = 0  # finished rows older than this are trimmed too; 0 = no age limit
    keep_dead_ms: int = 0
    # Where a queue's ids start when nothing says where the last one was: None is
    # 0 with a log to load, else the start time, so that no id of an earlier
    # process names a new job (PROTOCOL.md 6.1). Server resolves it at start.
    id_base: int | None = None
    # Cluster mode (docs/CLUSTER.md): the seed nodes, "HOST:PORT[,HOST:PORT...]", of a
    # Valkey or Redis Cluster that holds every queue; None: the embedded single process.
    cluster: str | None = None
    # Replicas that must acknowledge each write (WAIT) before its reply leaves; None:
    # 1 where the queue's shard has a replica, 0 where it has none.
    cluster_acks: int | None = None
    cluster_lease_ms: int = 5000  # a front's lease on a queue it owns, renewed a third in
    cluster_timeout_ms: int = 5000  # a write the cluster does not take this long: TRYAGAIN
    cluster_announce: str | None = None  # HOST:PORT other fronts reach this one at
    cluster_idle_ms: int = 30000  # an owned queue with no request this long is let go
    # The user and password this front gives the cluster's nodes (AUTH), where they ask
    # for one (docs/CLUSTER.md, "Keeping clients out of the fronts' keys"): None, none.
    cluster_user: str | None = None
    cluster_password: str | None = None
