"""A queue's settings (protocol section 6.3): its own `config` hash over the server's defaults.

Server flags give the defaults; `EMQ.CONFIG QUEUE SET` writes a queue's own
values into `p.."config"`. Every stored value a plan depends on is validated
when read, because a plain HSET from a client can put anything there: a
corrupt value refuses the verb (nothing written) instead of breaking a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from emqd import errors
from emqd.config import Config
from emqd.numbers import parse_int
from emqd.verbs.backoff import Backoff, parse_backoff
from emqd.verbs.runner import HGETALL


def _positive(raw: bytes) -> int | None:
    number = parse_int(raw)
    return number if number is not None and number > 0 else None


def _non_negative(raw: bytes) -> int | None:
    number = parse_int(raw)
    return number if number is not None and number >= 0 else None


# field -> (reader returning None when invalid, the error CONFIG SET answers)
FIELDS: dict[bytes, tuple[Callable[[bytes], object], errors.Refusal]] = {
    b"max_attempts": (_positive, errors.must_be_positive("max_attempts")),
    b"backoff": (parse_backoff, errors.INVALID_BACKOFF),
    b"max_stalled": (_positive, errors.must_be_positive("max_stalled")),
    b"keep_completed": (_non_negative, errors.must_be_non_negative("keep_completed")),
    b"keep_dead": (_non_negative, errors.must_be_non_negative("keep_dead")),
    b"lane_limit": (_non_negative, errors.must_be_non_negative("lane_limit")),
}


@dataclass(frozen=True, slots=True)
class Settings:
    max_attempts: int
    backoff: Backoff
    max_stalled: int
    keep_completed: int
    keep_dead: int
    lane_limit: int


def defaults(config: Config) -> dict[bytes, bytes]:
    """The server's defaults as the stored form, field by field."""
    return {
        b"max_attempts": b"%d" % config.max_attempts,
        b"backoff": config.backoff.encode(),
        b"max_stalled": b"%d" % config.max_stalled,
        b"keep_completed": b"%d" % config.keep_completed,
        b"keep_dead": b"%d" % config.keep_dead,
        b"lane_limit": b"%d" % config.lane_limit,
    }


def effective_raw(row: dict | None, config: Config) -> dict[bytes, bytes]:
    """Every setting's effective stored form: the queue's own, else the default."""
    values = defaults(config)
    if row:
        for field in FIELDS:
            if field in row:
                values[field] = row[field]
    return values


# Validated settings by (config, the queue's stored values): the hot verbs
# (COMPLETE, FAIL, CLAIM's dead letters) read them on every call and nearly
# always find the same bytes, so parsing them again is wasted work. Only valid
# settings are kept; a corrupt value is refused again on every call.
_validated: dict[tuple, tuple[Config, Settings]] = {}
_VALIDATED_MAX = 1024


def effective(row: dict | None, config: Config) -> Settings:
    """The validated settings; a corrupt stored value raises `corrupt_setting`."""
    key = (id(config), *[row.get(field) for field in FIELDS]) if row else (id(config),)
    hit = _validated.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    settings = _parse(row, config)
    if len(_validated) >= _VALIDATED_MAX:
        _validated.clear()
    _validated[key] = (config, settings)
    return settings


def _parse(row: dict | None, config: Config) -> Settings:
    raw = effective_raw(row, config)
    parsed = {}
    for field, (reader, _) in FIELDS.items():
        value = reader(raw[field])
        if value is None:
            raise errors.corrupt_setting(field)
        parsed[field.decode()] = value
    return Settings(**parsed)  # type: ignore[arg-type]


def validate(field: bytes, value: bytes) -> None:
    """CONFIG SET's check of one pair: unknown field or invalid value."""
    entry = FIELDS.get(field)
    if entry is None:
        raise errors.unknown_field(field)
    reader, error = entry
    if reader(value) is None:
        raise error()


def settings_read(config_key: bytes) -> tuple:
    """The runner read (see runner.py) of a queue's `config` hash."""
    return (HGETALL, config_key)


def from_reads(config_key: bytes, reads: dict, config: Config) -> Settings | None:
    """The queue's validated settings once `settings_read` is in `reads`, else None."""
    read = settings_read(config_key)
    if read not in reads:
        return None
    return effective(reads[read], config)
