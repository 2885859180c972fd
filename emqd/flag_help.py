"""What each of emqd's flags means, with its unit: `emqd --help` (cli.py) shows these.

One entry per field of Config (tests/test_cli.py checks that none is missing), so
a new setting cannot arrive without its explanation. The default and the
environment variable are added by cli.py.
"""

from __future__ import annotations

from typing import Final

FLAG_HELP: Final = {
    "bind": "Address to listen on, for RESP and the dashboard. Anything but loopback needs "
            "--requirepass.",
    "port": "TCP port of the RESP protocol; 0 turns the plain port off (TLS only).",
    "tls_port": "TCP port for RESP over TLS; 0 = none. Needs --tls-cert-file and "
                "--tls-key-file.",
    "tls_cert_file": "The server's certificate (PEM file) for --tls-port.",
    "tls_key_file": "The private key (PEM file) of --tls-cert-file.",
    "tls_ca_cert_file": "The CA (PEM file) that signs the clients' certificates.",
    "tls_auth_clients": "Whether a TLS client must show a certificate: yes, no, or optional.",
    "http_port": "TCP port of the dashboard and /metrics, on --bind; 0 turns them off.",
    "dir": "Directory of the append-only file (emqd.aof); it must exist.",
    "appendonly": "Keep every write in the append-only file, so jobs survive a restart: "
                  "yes or no (no: everything is forgotten at exit).",
    "appendfsync": "When the log is flushed to disk: always (before each reply), everysec "
                   "(once a second; a power cut loses at most that second) or no (when the "
                   "OS decides).",
    "aof_rewrite_min_size": "Size in bytes the log must reach before it is compacted "
                            "automatically.",
    "requirepass": "Password clients must give (AUTH, or HTTP basic auth on the dashboard).",
    "stalled_interval": "How often the server looks for expired leases and puts their jobs "
                        "back, in milliseconds; 0 turns the sweep off.",
    "max_payload": "Largest payload a job may carry, in bytes.",
    "maxclients": "Most client connections at once.",
    "loglevel": "What the server logs to stderr: debug, info or warning.",
    "maxmemory": "Memory the data may use, in bytes; past it, commands that would grow the "
                 "data are refused with OOM while claims, settles and reads go on; 0 = no "
                 "limit.",
    "maxmemory_policy": "What to do past --maxmemory: noeviction (refuse the writes; a job "
                        "queue never evicts), the only policy.",
    "pubsub_hard_limit": "A subscriber with this many bytes unsent is disconnected; 0 = no "
                         "limit.",
    "pubsub_soft_limit": "A subscriber over this many unsent bytes for --pubsub-soft-seconds "
                         "is disconnected; 0 = no limit.",
    "pubsub_soft_seconds": "How long, in seconds, a subscriber may stay over "
                           "--pubsub-soft-limit.",
    "normal_hard_limit": "A client with this many bytes of replies unsent is disconnected; 0 "
                         "= no limit.",
    "normal_soft_limit": "A client over this many unsent bytes for --normal-soft-seconds is "
                         "disconnected; 0 = no limit.",
    "normal_soft_seconds": "How long, in seconds, a client may stay over --normal-soft-limit.",
    "hash_max_listpack_entries": "Redis's encoding threshold: a hash with more fields is "
                                 "reported as a hashtable (OBJECT ENCODING).",
    "hash_max_listpack_value": "Redis's encoding threshold: a hash with a longer value, in "
                               "bytes, is reported as a hashtable.",
    "zset_max_listpack_entries": "Redis's encoding threshold: a sorted set with more members "
                                 "is reported as a skiplist.",
    "zset_max_listpack_value": "Redis's encoding threshold: a sorted set with a longer "
                               "member, in bytes, is reported as a skiplist.",
    "max_attempts": "Default for every queue: failures (EMQ.FAIL) a job may have before it "
                    "is dead-lettered.",
    "backoff": "Default for every queue: the delay before a failed job is retried, "
               "fixed:MS or exp:BASE_MS:MAX_MS.",
    "max_stalled": "Default for every queue: how often a job's lease may run out (a worker "
                   "that vanished) before it is dead-lettered.",
    "keep_completed": "Default for every queue: completed jobs kept for inspection (the "
                      "oldest are deleted past it).",
    "keep_dead": "Default for every queue: dead letters kept (the oldest are deleted past "
                 "it).",
    "lane_limit": "Default for every queue: jobs of one lane (GROUP) that run at once.",
    "keep_log_lines": "Default for every queue: a job's newest EMQ.LOG lines kept; 0 keeps "
                      "none.",
    "keep_completed_ms": "Default for every queue: completed jobs older than this, in "
                         "milliseconds, are deleted; 0 = no age limit.",
    "keep_dead_ms": "Default for every queue: dead letters older than this, in milliseconds, "
                    "are deleted; 0 = no age limit.",
    "id_base": "Where a queue's generated ids start when nothing says where the last one was "
               "(an integer); by default 0 with a log to load, else the start time in "
               "milliseconds, so that no id of an earlier process names a new job.",
    "cluster": "Cluster mode (docs/CLUSTER.md): the seed nodes, HOST:PORT[,HOST:PORT...], of "
               "a Valkey or Redis Cluster that holds every queue; unset: the embedded single "
               "process.",
    "cluster_acks": "Cluster mode: replicas that must acknowledge each write before its reply "
                    "leaves (an integer); by default 1 where the queue's shard has a replica, "
                    "0 where it has none.",
    "cluster_lease_ms": "Cluster mode: this front's lease on a queue it owns, in "
                        "milliseconds (renewed every third of it).",
    "cluster_timeout_ms": "Cluster mode: how long a write may wait for the cluster, in "
                          "milliseconds, before it answers TRYAGAIN.",
    "cluster_announce": "Cluster mode: the HOST:PORT other fronts reach this one at.",
    "cluster_idle_ms": "Cluster mode: a queue this front owns with no request for this many "
                       "milliseconds, no job running and nothing on its way to the cluster, "
                       "is let go (whoever it belongs to takes it when next asked or due).",
    "cluster_user": "Cluster mode: the user this front authenticates as to the cluster's "
                    "nodes (with --cluster-password; default: the nodes' default user).",
    "cluster_password": "Cluster mode: the password this front gives the cluster's nodes "
                        "(AUTH); set it in EMQD_CLUSTER_PASSWORD rather than on the command "
                        "line.",
    "http_maxclients": "The dashboard's own cap on open HTTP connections (an integer): past "
                       "it, 503 and closed, so the HTTP side never takes the RESP port's "
                       "descriptors.",
    "http_head_timeout_ms": "How long an HTTP request's head may take to arrive, in "
                            "milliseconds, before 408 and the connection closed.",
}
