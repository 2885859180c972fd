"""scan.py: HSCAN/ZSCAN options, and the cursor walk's guarantees."""

from __future__ import annotations

import random

import pytest

from emqd.errors import NOT_INTEGER, SYNTAX, Refusal, ReplyError
from emqd.scan import parse_options, walk


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


def full_walk(members: set[bytes], count: int, churn: random.Random | None = None,
              stable: set[bytes] | None = None) -> list[bytes]:
    seen: list[bytes] = []
    cursor = 0
    for _ in range(10_000):
        cursor, chunk = walk(members, cursor, count)
        seen += chunk
        if churn is not None:  # add and remove members that are not in `stable`
            members.add(b"new%d" % churn.randrange(10_000))
            gone = [m for m in members if m not in (stable or set())][:2]
            for member in gone:
                members.discard(member)
        if cursor == 0:
            return seen
    raise AssertionError("walk did not end")


@pytest.mark.parametrize("count", [1, 3, 10, 1000])
def test_walk_returns_every_member_once(count: int) -> None:
    members = {b"m%d" % i for i in range(300)}
    seen = full_walk(set(members), count)
    assert sorted(seen) == sorted(members)


def test_walk_keeps_members_present_throughout_despite_churn() -> None:
    stable = {b"s%d" % i for i in range(200)}
    members = set(stable) | {b"x%d" % i for i in range(100)}
    seen = full_walk(members, 7, random.Random(3), stable)
    assert stable <= set(seen)
    assert len([m for m in seen if m in stable]) == len(stable)  # none twice


def test_walk_chunks_are_about_count() -> None:
    members = {b"m%d" % i for i in range(100)}
    cursor, chunk = walk(members, 0, 10)
    assert cursor != 0 and len(chunk) == 10
