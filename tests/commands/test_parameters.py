"""CONFIG SET's readers of a value, case by case, as Redis 7.0's config.c reads them.

The wire tests (tests/commands/test_config.py) compare the same texts with a
redis-server; these pin the corners that are awkward to send (NUL bytes, wraps).
"""

from __future__ import annotations

import pytest

from emqd.commands.parameters import (
    BY_NAME,
    PARAMETERS,
    BadValue,
    choice,
    integer,
    memory,
    memtoull,
    output_limits,
)
from emqd.config import Config

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(("raw", "value"), [
    (b"0", 0), (b"512", 512), (b"1k", 1000), (b"1kb", 1024), (b"1KB", 1024), (b"2m", 2_000_000),
    (b"64mb", 64 << 20), (b"1g", 10**9), (b"1gb", 1 << 30), (b"5b", 5), (b"", 0), (b"kb", 0),
    (b"7\0junk", 7), (b"99999999999999999999", 2**64 - 1),
    (b"18446744073709551615kb", 2**64 - 1024),  # the product wraps at 64 bits
])
def test_memtoull_reads_what_redis_reads(raw: bytes, value: int) -> None:
    assert memtoull(raw) == value


@pytest.mark.parametrize("raw", [b"-1", b"+1", b"1 kb", b"1tb", b"1.5mb", b"0x10", b" 1",
                                 b"1" * 128])
def test_memtoull_refuses_what_redis_refuses(raw: bytes) -> None:
    assert memtoull(raw) is None


def _reason(read, raw: bytes) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(BadValue) as refused:
        read(raw)
    return refused.value.reason


def test_integers_and_memory_values_with_their_bounds() -> None:
    entries, size = integer(0, INT64_MAX), memory(0, INT64_MAX)
    assert entries(b"9223372036854775807") == INT64_MAX and size(b"8796093022208kb") == 2**53
    for raw in (b"", b"+5", b"05", b" 5", b"1kb", b"9223372036854775808", b"-0"):
        assert _reason(entries, raw) == "argument couldn't be parsed into an integer", raw
    between = "argument must be between 0 and 9223372036854775807 inclusive"
    assert _reason(entries, b"-1") == between
    assert _reason(size, b"9223372036854775808") == between
    assert _reason(size, b"9007199254740992kb") == between  # 2**63: past the signed range
    assert _reason(size, b"-1") == "argument must be a memory value"
    assert _reason(integer(1, 2**32 - 1), b"0") == \
        "argument must be between 1 and 4294967295 inclusive"


def test_a_choice_takes_any_case_and_lists_the_choices() -> None:
    fsync = choice("everysec", "always", "no")
    assert fsync(b"ALWAYS") == "always"
    assert _reason(fsync, b"sometimes") == \
        "argument(s) must be one of the following: everysec, always, no"


def test_output_limits_read_redis_s_line_and_keep_the_class_emqd_does_not_limit() -> None:
    assert output_limits(b"pubsub 64mb 16mb 30") == {
        "pubsub_hard_limit": 64 << 20, "pubsub_soft_limit": 16 << 20, "pubsub_soft_seconds": 30}
    assert output_limits(b"") == {}
    assert output_limits(b"PUBSUB 1 2 +3 pubsub 4 5 6")["pubsub_hard_limit"] == 4  # the last wins
    assert output_limits(b"pubsub 0 0 4294967296")["pubsub_soft_seconds"] == 0  # a C int
    shown = BY_NAME[b"client-output-buffer-limit"].show(Config())
    assert output_limits(shown.encode())["pubsub_hard_limit"] == 32 << 20  # GET's line sets back
    assert output_limits(b"replica 256mb 64mb 60") == {}
    assert output_limits(b"normal 1mb 512kb 10 pubsub 0 0 0") == {
        "normal_hard_limit": 1 << 20, "normal_soft_limit": 512 << 10, "normal_soft_seconds": 10,
        "pubsub_hard_limit": 0, "pubsub_soft_limit": 0, "pubsub_soft_seconds": 0}
    wrong = {
        b"pubsub 1 1": "Wrong number of arguments in buffer limit configuration.",
        b"master 1 1 1": "Invalid client class specified in buffer limit configuration.",
        b"pubsub 1  1 1 x x x": "Invalid client class specified in buffer limit configuration.",
    }
    for raw in (b"pubsub 1x 1 1", b"pubsub 1 -1 1", b"pubsub 1 1 -1", b"pubsub 1 1 1x",
                b"pubsub 1 1 +", b"pubsub 1 1 \t", b"pubsub 1 1 2147483648",
                b"pubsub 1 1 99999999999999999999"):
        wrong[raw] = "Error in hard, soft or soft_seconds setting in buffer limit configuration."
    for raw in (b"replica 1 0 0", b"slave 1 2 3"):
        wrong[raw] = "emqd has no replicas: the replica class stays 268435456 67108864 60"
    for raw, reason in wrong.items():
        assert _reason(output_limits, raw) == reason, raw


def test_every_parameter_shows_a_value_and_names_are_unique_and_lower_case() -> None:
    names = [parameter.name for parameter in PARAMETERS]
    assert len(set(names)) == len(names) and all(name == name.lower() for name in names)
    config = Config()
    for parameter in PARAMETERS:
        assert isinstance(parameter.show(config), str), parameter.name


def test_each_settable_parameter_sets_what_it_shows() -> None:
    """A value read back: CONFIG SET of what CONFIG GET shows changes nothing."""
    config = Config()
    for parameter in PARAMETERS:
        if parameter.read is None:
            continue
        shown = parameter.show(config)
        changes = parameter.read(shown.encode())
        assert all(getattr(config, field) == value for field, value in changes.items()), \
            parameter.name


def test_the_old_ziplist_names_set_the_same_fields() -> None:
    for kind in ("hash", "zset"):
        for what in ("entries", "value"):
            new, old = (BY_NAME[f"{kind}-max-{pack}-{what}".encode()] for pack in
                        ("listpack", "ziplist"))
            assert new.read is not None and old.read is not None
            assert new.read(b"7") == old.read(b"7") == {f"{kind}_max_listpack_{what}": 7}
