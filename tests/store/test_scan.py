"""scan.py's options, and store/scan_index.py: the index a scan pages through."""

from __future__ import annotations

import pytest

from emqd.compat.scan import parse_options
from emqd.errors import NOT_INTEGER, SYNTAX, Refusal, ReplyError
from emqd.store.scan_index import TARGET, ScanIndex, position, snapshot_chunks


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], (10, None)),
        ([b"COUNT", b"5"], (5, None)),
        ([b"count", b"5", b"COUNT", b"7"], (7, None)),
        ([b"MATCH", b"*"], (10, None)),
        ([b"MATCH", b"a*", b"MATCH", b"*"], (10, None)),
        ([b"COUNT", b"0"], SYNTAX),
        ([b"COUNT", b"-1"], SYNTAX),
        ([b"COUNT", b"x"], NOT_INTEGER),
        ([b"COUNT", b"01"], NOT_INTEGER),
        ([b"COUNT"], SYNTAX),
        ([b"MATCH"], SYNTAX),
        ([b"TYPE", b"hash"], SYNTAX),
        ([b"NOPE", b"1"], SYNTAX),
    ],
)
def test_parse_options(argv: list[bytes], expected: tuple | ReplyError) -> None:
    full = [b"HSCAN", b"key", b"0", *argv]
    if isinstance(expected, (ReplyError, Refusal)):
        with pytest.raises(ReplyError) as caught:
            parse_options(full, 3)
        assert caught.value == expected
    else:
        count, pattern = parse_options(full, 3)
        assert (count, pattern) == expected


def test_parse_options_compiles_a_real_pattern() -> None:
    count, pattern = parse_options([b"ZSCAN", b"k", b"0", b"MATCH", b"m?"], 3)
    assert count == 10 and pattern is not None and pattern(b"m1") and not pattern(b"x1")


def build(members: set[bytes], chunk: int = 7) -> ScanIndex:
    names = sorted(members)
    index = ScanIndex(len(names), snapshot_chunks(names, chunk))
    assert index.build(len(names) + chunk)
    return index


def full_scan(index: ScanIndex, count: int) -> tuple[list[bytes], int]:
    seen: list[bytes] = []
    cursor, calls = 0, 0
    while True:
        cursor, chunk = index.page(cursor, count)
        seen += chunk
        calls += 1
        if cursor == 0:
            return seen, calls


@pytest.mark.parametrize("count", [1, 3, 10, 1000])
def test_a_scan_returns_every_member_once_in_about_n_over_count_calls(count: int) -> None:
    members = {b"m%d" % i for i in range(3000)}
    seen, calls = full_scan(build(members), count)
    assert sorted(seen) == sorted(members)
    buckets = 1 << (3000 // TARGET).bit_length()
    assert calls <= min(buckets, 3000 // count + 2)


def test_a_call_takes_whole_buckets_until_count_and_returns_their_end() -> None:
    members = {b"m%d" % i for i in range(2000)}
    index = build(members)
    cursor, chunk = index.page(0, 10)
    assert 10 <= len(chunk) < 10 + 4 * TARGET
    assert all(position(m) < cursor for m in chunk)
    assert all(position(m) >= cursor for m in members - set(chunk))


@pytest.mark.parametrize("grown", [True, False])
def test_positions_are_fixed_so_a_cursor_survives_an_index_of_another_size(grown: bool) -> None:
    """The index is dropped between two calls and built again at another size (more
    buckets, or fewer, so that the cursor falls inside one): nothing is missed or
    repeated."""
    stable = {b"m%d" % i for i in range(2000)}
    other = {b"n%d" % i for i in range(5000)}
    before, after = (stable, stable | other) if grown else (stable | other, stable)
    old, new = build(before), build(after)
    for count in range(20, 200):  # a first call whose end is inside one of `new`'s buckets
        cursor, first = old.page(0, count)
        if grown or (cursor - 1) & ((1 << new.shift) - 1):
            break
    rest = full_scan_from(new, cursor, 7)
    assert sorted((set(first) & stable) | (set(rest) & stable)) == sorted(stable)
    assert not set(first) & set(rest)


def full_scan_from(index: ScanIndex, cursor: int, count: int) -> list[bytes]:
    seen: list[bytes] = []
    while True:
        cursor, chunk = index.page(cursor, count)
        seen += chunk
        if cursor == 0:
            return seen


def test_the_build_goes_a_step_a_call_and_writes_meanwhile_are_kept() -> None:
    members = {b"m%d" % i for i in range(100)}
    names = sorted(members)
    index = ScanIndex(len(names), snapshot_chunks(names, 10))
    assert not index.build(30)
    members.discard(b"m99")  # gone before the walk got there
    assert index.removed(b"m99") is index
    members.add(b"new")  # came after the snapshot
    assert index.added(b"new") is index
    members.discard(b"m0")  # gone after the walk saw it
    assert index.removed(b"m0") is index
    assert index.build(1000)
    seen, _ = full_scan(index, 10)
    assert sorted(seen) == sorted(members)


def test_an_index_written_more_than_it_is_used_asks_to_be_dropped() -> None:
    index = build({b"a", b"b"})
    for _ in range(index.writes_max):
        assert index.added(b"x") is index
    assert index.added(b"x") is None
    index = build({b"a", b"b"})
    for _ in range(index.writes_max):
        index.removed(b"x")
    index.page(0, 1)  # used: the count starts again
    assert index.removed(b"x") is index


def test_a_cursor_past_every_position_ends_the_scan() -> None:
    assert build({b"m%d" % i for i in range(500)}).page(2**64 - 1, 10) == (0, [])
