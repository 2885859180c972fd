"""Every parameter CONFIG GET shows, and how CONFIG SET reads a new value for it.

Each parameter has a name (Redis's where Redis has the setting, else emqd's
flag's: `--stalled-interval` is `stalled-interval`), the text
CONFIG GET shows from a `Config`, and, when emqd can change it at run time, a
reader that turns CONFIG SET's value into the Config fields it sets (or
raises `BadValue` with Redis's reason). A parameter without a reader cannot
change while the server runs: the sockets (`port`, `bind`, `tls-*`,
`http-port`) are bound at start, the log is opened (`appendonly`), the ids
start from `id-base`, the password guards the dashboard and the start's
protected mode (`requirepass`), and the rest are Redis's settings that emqd
only answers (`databases`, `save`, ...). Redis's old `*-ziplist-*`
names are parameters of their own that set the same field, as in Redis 7.0,
which lists both.

The readers are Redis 7.0's (config.c), so that a value is refused with
Redis's words: integers as string2ll reads them, memory values as memtoull
(`64mb`, `1gb`, `512`), enumerations case-insensitively, and
`client-output-buffer-limit` as its classes and limits.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emqd.compat.numbers import INT64_MAX, UINT64_MAX, parse_int
from emqd.config import LOG_LEVELS, Config
from emqd.errors import c_string
from emqd.rules.backoff import parse_backoff

UINT32_MAX = 2**32 - 1

Changes = dict[str, Any]  # Config field -> new value
Reader = Callable[[bytes], Changes]


class BadValue(Exception):
    """A value CONFIG SET refuses; `reason` is the text after Redis's ` - `."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    show: Callable[[Config], str]
    read: Reader | None = None  # None: it cannot change at run time
    protected: bool = False  # Redis refuses these with its own words (`dir`)


# --- Redis 7.0's readers of a value ----------------------------------------------------------
def _in_bounds(number: int, low: int, high: int) -> int:
    """Redis compares as unsigned 64-bit: a negative number is refused by any bounds here."""
    if not low <= number % (UINT64_MAX + 1) <= high:
        raise BadValue(f"argument must be between {low} and {high} inclusive")
    return number


def integer(low: int, high: int) -> Callable[[bytes], int]:
    def read(raw: bytes) -> int:
        number = parse_int(raw)
        if number is None:
            raise BadValue("argument couldn't be parsed into an integer")
        return _in_bounds(number, low, high)

    return read


_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000**2, b"mb": 1024**2,
          b"g": 1000**3, b"gb": 1024**3}


def memtoull(raw: bytes) -> int | None:
    """Redis's memtoull: digits and a unit (`k` 1000, `kb` 1024, ... `gb`), None when refused.

    As in C, the text ends at a NUL byte, no digits read as 0, a number past 64
    bits as the largest, and the product wraps at 64 bits.
    """
    text = c_string(raw)
    if text.startswith(b"-"):
        return None
    digits = len(text) - len(text.lstrip(b"0123456789"))
    multiplier = _UNITS.get(text[digits:].lower())
    if multiplier is None or digits >= 128:
        return None
    number = min(int(text[:digits] or b"0"), UINT64_MAX)
    return number * multiplier % (UINT64_MAX + 1)


def memory(low: int, high: int) -> Callable[[bytes], int]:
    def read(raw: bytes) -> int:
        number = memtoull(raw)
        if number is None:
            raise BadValue("argument must be a memory value")
        return _in_bounds(number, low, high)

    return read


def choice(*names: str) -> Callable[[bytes], str]:
    """One of `names`, in any case; refused with them listed in Redis's words."""
    def read(raw: bytes) -> str:
        name = raw.decode("latin-1").lower()
        if name not in names:
            raise BadValue(f"argument(s) must be one of the following: {', '.join(names)}")
        return name

    return read


# Redis 7.0's maxmemory policies; emqd takes only the one that never evicts.
EVICTION_POLICIES = ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
                     "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction")


def eviction_policy(raw: bytes) -> str:
    """`noeviction`: a job queue must never drop a job to make room; Redis's other
    policies are refused as unsupported, anything else with Redis's words."""
    name = choice(*EVICTION_POLICIES)(raw)
    if name != "noeviction":
        raise BadValue(f"emqd never evicts: {name} is not supported, only noeviction")
    return name


def backoff(raw: bytes) -> str:
    if parse_backoff(raw) is None:
        raise BadValue("argument must be a backoff rule (N, fixed:N or exp:BASE[:MAX])")
    return raw.decode()


# --- client-output-buffer-limit ---------------------------------------------------------------
_CLASSES = {b"normal": "normal", b"slave": "replica", b"replica": "replica", b"pubsub": "pubsub"}
_REPLICA_LIMITS = (268435456, 67108864, 60)  # emqd has no replicas: shown as Redis's default


def _strtoll(raw: bytes) -> int | None:
    """C's strtoll where the whole text must be read (leading spaces and a sign allowed),
    then cut to a C int as Redis stores the seconds; None when refused."""
    text = c_string(raw)
    body = text.lstrip(b" \t\n\v\f\r")
    digits = body[1:] if body[:1] in (b"+", b"-") else body
    if not digits:
        return None if text else 0  # no number: refused unless the text is empty
    if not digits.isdigit():
        return None
    number = max(min(int(body), INT64_MAX), -INT64_MAX - 1)
    number &= UINT32_MAX
    return number - (1 << 32) if number >> 31 else number


def output_limits(raw: bytes) -> Changes:
    """`<class> <hard> <soft> <seconds>` ..., split on single spaces as Redis splits it.

    emqd limits the `normal` and `pubsub` classes (emqd/wire/output_limit.py); it has
    no replicas, so the `replica` class keeps the values CONFIG GET shows (the
    line it shows can be set back) and any other value for it is refused.
    """
    words = raw.split(b" ") if raw else []
    if len(words) % 4:
        raise BadValue("Wrong number of arguments in buffer limit configuration.")
    limits: dict[str, tuple[int, int, int]] = {}
    for i in range(0, len(words), 4):
        kind = _CLASSES.get(words[i].lower())
        if kind is None:
            raise BadValue("Invalid client class specified in buffer limit configuration.")
        hard, soft, seconds = memtoull(words[i + 1]), memtoull(words[i + 2]), _strtoll(words[i + 3])
        if hard is None or soft is None or seconds is None or seconds < 0:
            raise BadValue("Error in hard, soft or soft_seconds setting in buffer limit "
                           "configuration.")
        limits[kind] = (hard, soft, seconds)
    if limits.get("replica", _REPLICA_LIMITS) != _REPLICA_LIMITS:
        raise BadValue("emqd has no replicas: the replica class stays 268435456 67108864 60")
    changes: Changes = {}
    for kind in ("normal", "pubsub"):
        if kind in limits:
            hard, soft, seconds = limits[kind]
            changes |= {f"{kind}_hard_limit": hard, f"{kind}_soft_limit": soft,
                        f"{kind}_soft_seconds": seconds}
    return changes


def _show_output_limits(config: Config) -> str:
    classes = [("normal", (config.normal_hard_limit, config.normal_soft_limit,
                           config.normal_soft_seconds)),
               ("slave", _REPLICA_LIMITS),
               ("pubsub", (config.pubsub_hard_limit, config.pubsub_soft_limit,
                           config.pubsub_soft_seconds))]
    return " ".join(f"{name} {hard} {soft} {seconds}" for name, (hard, soft, seconds) in classes)


# --- the table ----------------------------------------------------------------------------------
def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def field(name: str, attribute: str, read: Callable[[bytes], object] | None = None) -> Parameter:
    """A parameter shown from, and set into, one field of the Config."""
    def show(config: Config) -> str:
        return _text(getattr(config, attribute))

    if read is None:
        return Parameter(name, show)
    reader = read

    def set_(raw: bytes) -> Changes:
        return {attribute: reader(raw)}

    return Parameter(name, show, set_)


def fixed(name: str, value: str) -> Parameter:
    """A setting of Redis's that emqd answers as the Redis it mirrors has it."""
    return Parameter(name, lambda config: value)


_COUNT = integer(0, INT64_MAX)
_POSITIVE = integer(1, INT64_MAX)
_BYTES = memory(0, INT64_MAX)


def _encoding(kind: str, what: str) -> list[Parameter]:
    """`hash-max-listpack-entries` and its old name `hash-max-ziplist-entries`, ..."""
    read = _COUNT if what == "entries" else _BYTES
    attribute = f"{kind}_max_listpack_{what}"
    return [field(f"{kind}-max-{pack}-{what}", attribute, read) for pack in ("listpack", "ziplist")]


PARAMETERS: list[Parameter] = [
    # the sockets, the log, the password: fixed once the server started
    field("bind", "bind"),
    field("port", "port"),
    field("tls-port", "tls_port"),
    field("tls-cert-file", "tls_cert_file"),
    field("tls-key-file", "tls_key_file"),
    field("tls-ca-cert-file", "tls_ca_cert_file"),
    field("tls-auth-clients", "tls_auth_clients"),
    field("http-port", "http_port"),
    field("http-maxclients", "http_maxclients"),
    field("http-head-timeout-ms", "http_head_timeout_ms"),
    field("id-base", "id_base"),  # as the server resolved it at start
    Parameter("dir", lambda config: os.path.abspath(config.dir), protected=True),
    field("appendonly", "appendonly"),
    fixed("appendfilename", "emqd.aof"),
    field("requirepass", "requirepass"),
    # what CONFIG SET changes
    field("appendfsync", "appendfsync", choice("everysec", "always", "no")),
    field("auto-aof-rewrite-min-size", "aof_rewrite_min_size", _BYTES),
    field("maxclients", "maxclients", integer(1, UINT32_MAX)),
    field("maxmemory", "maxmemory", _BYTES),
    field("maxmemory-policy", "maxmemory_policy", eviction_policy),
    field("loglevel", "loglevel", choice(*LOG_LEVELS)),
    Parameter("client-output-buffer-limit", _show_output_limits, output_limits),
    *_encoding("hash", "entries"),
    *_encoding("hash", "value"),
    *_encoding("zset", "entries"),
    *_encoding("zset", "value"),
    field("stalled-interval", "stalled_interval", _COUNT),
    field("max-payload", "max_payload", _BYTES),
    field("max-attempts", "max_attempts", _POSITIVE),
    field("backoff", "backoff", backoff),
    field("max-stalled", "max_stalled", _POSITIVE),
    field("keep-completed", "keep_completed", _COUNT),
    field("keep-dead", "keep_dead", _COUNT),
    field("lane-limit", "lane_limit", _COUNT),
    field("keep-log-lines", "keep_log_lines", _COUNT),
    field("keep-completed-ms", "keep_completed_ms", _COUNT),
    field("keep-dead-ms", "keep_dead_ms", _COUNT),
    # Redis's, answered as the reference Redis has them
    fixed("databases", "1"),
    fixed("save", ""),
    fixed("timeout", "0"),
    fixed("tcp-keepalive", "300"),
    fixed("protected-mode", "yes"),
    fixed("proto-max-bulk-len", "536870912"),
    fixed("cluster-enabled", "no"),
    fixed("io-threads", "1"),
    fixed("hz", "10"),
    fixed("slowlog-log-slower-than", "10000"),
    fixed("slowlog-max-len", "128"),
]

BY_NAME: dict[bytes, Parameter] = {parameter.name.encode(): parameter for parameter in PARAMETERS}
