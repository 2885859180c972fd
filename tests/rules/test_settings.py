"""Queue settings: defaults from the server, a queue's own values, corrupt values refused."""

from __future__ import annotations

import pytest

from emqd import errors
from emqd.config import Config
from emqd.rules import settings
from emqd.rules.backoff import Backoff, parse_backoff
from emqd.store import hash as hashes


def row(fields: dict[bytes, bytes]) -> hashes.Hash:
    """A queue's `config` hash as the store holds it."""
    return hashes.written(None, tuple(fields), tuple(fields.values()), hashes.Limits())


def test_defaults_come_from_the_server_config() -> None:
    got = settings.effective(None, Config(max_attempts=7, backoff="exp:5", keep_dead=3,
                                          keep_log_lines=7))
    assert got.max_attempts == 7
    assert got.backoff == Backoff(5, True)
    assert (got.max_stalled, got.keep_completed, got.keep_dead, got.lane_limit,
            got.keep_log_lines) == (2, 1000, 3, 1, 7)


def test_queue_values_win() -> None:
    got = settings.effective(row({b"max_attempts": b"9", b"other": b"x"}), Config())
    assert got.max_attempts == 9


@pytest.mark.parametrize("field", [b"max_attempts", b"max_stalled", b"keep_dead", b"backoff",
                                   b"keep_log_lines"])
def test_corrupt_stored_value_refuses(field: bytes) -> None:
    with pytest.raises(errors.ReplyError) as caught:
        settings.effective(row({field: b"-1x"}), Config())
    assert caught.value == errors.corrupt_setting(field)


def test_validate_pairs() -> None:
    settings.validate(b"keep_completed", b"0")
    with pytest.raises(errors.ReplyError) as caught:
        settings.validate(b"max_attempts", b"0")
    assert caught.value == errors.must_be_positive("max_attempts")
    with pytest.raises(errors.ReplyError) as caught:
        settings.validate(b"colour", b"1")
    assert caught.value == errors.unknown_field(b"colour")


@pytest.mark.parametrize(
    ("rule", "delays"),
    [
        (b"250", [250, 250, 250]),
        (b"fixed:0", [0, 0]),
        (b"exp:100", [100, 200, 400, 800]),
        (b"exp:100:300", [100, 200, 300, 300]),
    ],
)
def test_backoff_rules(rule: bytes, delays: list[int]) -> None:
    backoff = parse_backoff(rule)
    assert backoff is not None
    assert [backoff.delay(f) for f in range(1, len(delays) + 1)] == delays


def test_exp_without_max_caps_at_an_hour() -> None:
    backoff = parse_backoff(b"exp:1000")
    assert backoff is not None
    assert backoff.delay(40) == 3_600_000
    assert backoff.delay(500) == 3_600_000


@pytest.mark.parametrize("rule", [b"", b"fixed", b"fixed:", b"exp:1:2:3", b"exp:-1", b"x:1", b"01"])
def test_bad_backoff_rules(rule: bytes) -> None:
    assert parse_backoff(rule) is None
