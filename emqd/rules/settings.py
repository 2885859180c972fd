"""A queue's settings (protocol section 6.3): its own `config` hash over the server's defaults.

Server flags give the defaults; `EMQ.CONFIG queue SET` writes a queue's own
values into `p.."config"`. Every stored value a plan depends on is validated
when read, because a plain HSET from a client can put anything there: a
corrupt value refuses the verb (nothing written) instead of breaking a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from emqd import errors
from emqd.compat.numbers import parse_int
from emqd.config import Config
from emqd.layout import QueueKeys
from emqd.rules.backoff import Backoff, parse_backoff
from emqd.store import hash as hashes
from emqd.store.hash import Hash
from emqd.store.keyspace import View


def _positive(raw: bytes) -> int | None:
    number = parse_int(raw)
    return number if number is not None and number > 0 else None


def _non_negative(raw: bytes) -> int | None:
    number = parse_int(raw)
    return number if number is not None and number >= 0 else None


# field -> (reader returning None when invalid, the error CONFIG SET answers)
FIELDS: Final[dict[bytes, tuple[Callable[[bytes], object], errors.Refusal]]] = {
    b"max_attempts": (_positive, errors.must_be_positive("max_attempts")),
    b"backoff": (parse_backoff, errors.INVALID_BACKOFF),
    b"max_stalled": (_positive, errors.must_be_positive("max_stalled")),
    b"keep_completed": (_non_negative, errors.must_be_non_negative("keep_completed")),
    b"keep_dead": (_non_negative, errors.must_be_non_negative("keep_dead")),
    b"lane_limit": (_non_negative, errors.must_be_non_negative("lane_limit")),
    b"keep_log_lines": (_non_negative, errors.must_be_non_negative("keep_log_lines")),
    b"keep_completed_ms": (_non_negative, errors.must_be_non_negative("keep_completed_ms")),
    b"keep_dead_ms": (_non_negative, errors.must_be_non_negative("keep_dead_ms")),
}


@dataclass(frozen=True, slots=True)
class Settings:
    max_attempts: int
    backoff: Backoff
    max_stalled: int
    keep_completed: int
    keep_dead: int
    lane_limit: int
    keep_log_lines: int
    keep_completed_ms: int  # 0: no age limit
    keep_dead_ms: int


def defaults(config: Config) -> dict[bytes, bytes]:
    """The server's defaults as the stored form, field by field."""
    return {
        b"max_attempts": b"%d" % config.max_attempts,
        b"backoff": config.backoff.encode(),
        b"max_stalled": b"%d" % config.max_stalled,
        b"keep_completed": b"%d" % config.keep_completed,
        b"keep_dead": b"%d" % config.keep_dead,
        b"lane_limit": b"%d" % config.lane_limit,
        b"keep_log_lines": b"%d" % config.keep_log_lines,
        b"keep_completed_ms": b"%d" % config.keep_completed_ms,
        b"keep_dead_ms": b"%d" % config.keep_dead_ms,
    }


def effective_raw(row: Hash | None, config: Config) -> dict[bytes, bytes]:
    """Every setting's effective stored form: the queue's own, else the default."""
    values = defaults(config)
    if row is not None:
        for name in FIELDS:
            value = hashes.get(row, name)
            if value is not None:
                values[name] = value
    return values


# Validated settings by (config, the queue's stored row): the hot verbs
# (COMPLETE, FAIL, CLAIM's dead letters) read them on every call and nearly
# always find the same row, so parsing it again is wasted work. A compact row
# is an immutable tuple, so it is its own cache key; only valid settings are
# kept, and a corrupt value is refused again on every call.
_validated: Final[dict[tuple[Any, ...], tuple[Config, Settings]]] = {}
_VALIDATED_MAX: Final = 1024


def effective(row: Hash | None, config: Config) -> Settings:
    """The validated settings; a corrupt stored value raises `corrupt_setting`."""
    if row is None:
        key: tuple[Any, ...] = (id(config),)
    elif type(row) is bytes:  # a Row: immutable, so a key of the cache
        key = (id(config), row)
    else:
        key = (id(config), *[hashes.get(row, name) for name in FIELDS])
    hit = _validated.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    settings = _parse(row, config)
    if len(_validated) >= _VALIDATED_MAX:
        _validated.clear()
    _validated[key] = (config, settings)
    return settings


def _parse(row: Hash | None, config: Config) -> Settings:
    raw = effective_raw(row, config)
    parsed: dict[str, Any] = {}  # each field as its reader made it (FIELDS)
    for name, (reader, _) in FIELDS.items():
        value = reader(raw[name])
        if value is None:
            raise errors.corrupt_setting(name)
        parsed[name.decode()] = value
    return Settings(**parsed)


def validate(name: bytes, value: bytes) -> None:
    """CONFIG SET's check of one pair: unknown field or invalid value."""
    entry = FIELDS.get(name)
    if entry is None:
        raise errors.unknown_field(name)
    reader, error = entry
    if reader(value) is None:
        raise error()


def of_queue(view: View, keys: QueueKeys, config: Config) -> Settings:
    """The queue's validated settings, read from its `config` hash."""
    return effective(view.hash(keys.config), config)
