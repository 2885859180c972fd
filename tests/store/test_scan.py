"""scan.py: Redis's glob (stringmatchlen), SCAN options, and the cursor walk's guarantees.

The glob rows follow util.c's stringmatchlen; the differential suite sends the
same kinds of patterns to a real redis-server through HSCAN/ZSCAN MATCH.
"""

from __future__ import annotations

import random

import pytest

from emqd.errors import NOT_INTEGER, SYNTAX, ReplyError
from emqd.scan import Pattern, parse_options, walk


@pytest.mark.parametrize(
    "pattern, text, matches",
    [
        (b"*", b"anything", True), (b"*", b"", False), (b"", b"", True), (b"", b"a", False),
        (b"**", b"", False), (b"a*", b"a", True), (b"*a", b"ba", True), (b"*a", b"ab", False),
        (b"a*b*c", b"aXbYc", True), (b"a*b*c", b"aXbY", False), (b"?", b"x", True),
        (b"?", b"", False), (b"?", b"xy", False), (b"h?llo", b"hello", True),
        (b"[abc]", b"b", True), (b"[abc]", b"d", False), (b"[^abc]", b"d", True),
        (b"[^abc]", b"a", False), (b"[a-c]x", b"bx", True), (b"[c-a]x", b"bx", True),
        (b"[]", b"a", False), (b"[^]", b"a", True), (b"[", b"a", False),
        (b"[ab", b"b", True),  # an unclosed class runs to the end of the pattern
        (b"[a-]", b"]", True),  # "a-]" is the range ]..a, and the class stays open
        (b"[\\]]", b"]", True), (b"\\*", b"*", True), (b"\\*", b"a", False),
        (b"a\\", b"a\\", True),  # a trailing backslash is a literal backslash
        (b"[\x80-\xff]", b"\x90", True), (b"[\x80-\xff]", b"a", False),
        # ranges compare signed chars: a..\xff spans \xff (-1) up to 'a' (97)
        (b"[a-\xff]", b"\x00", True), (b"[a-\xff]", b"b", False), (b"[a-\xff]", b"\xff", True),
        (b"*\x00*", b"a\x00b", True), (b"f*", b"F", False),
    ],
)
def test_pattern(pattern: bytes, text: bytes, matches: bool) -> None:
    assert Pattern(pattern).matches(text) is matches


def test_pathological_pattern_is_fast() -> None:
    pattern = Pattern(b"a*" * 50 + b"b")
    assert pattern.matches(b"a" * 5000) is False  # iterative: no exponential backtracking


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
    if isinstance(expected, ReplyError):
        with pytest.raises(ReplyError) as caught:
            parse_options(full, 3)
        assert caught.value == expected
    else:
        count, pattern = parse_options(full, 3)
        assert (count, pattern) == expected


def test_parse_options_compiles_a_real_pattern() -> None:
    count, pattern = parse_options([b"ZSCAN", b"k", b"0", b"MATCH", b"m?"], 3)
    assert count == 10 and pattern is not None and pattern.matches(b"m1")


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
