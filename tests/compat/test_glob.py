"""emqd/compat/glob.py, table-driven: Redis's stringmatchlen, corners included.

The rows follow util.c; tests/differential sends the same kinds of patterns
(and random ones) to a real redis-server through HSCAN / ZSCAN MATCH.
A bare `*` is every caller's "no filter" (it even lists the empty key);
any other pattern leaves the empty string to the empty pattern alone.
"""

from __future__ import annotations

import pytest

from emqd.compat.glob import compile_pattern


@pytest.mark.parametrize(
    "pattern, text, matches",
    [
        (b"*", b"anything", True), (b"*", b"", True), (b"", b"", True), (b"", b"a", False),
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
    assert compile_pattern(pattern)(text) is matches


def test_pubsub_matches_a_lone_star_as_written() -> None:
    """PSUBSCRIBE `*` does not receive a message on the empty channel (Redis has no shortcut)."""
    as_written = compile_pattern(b"*", star_matches_empty=False)
    assert as_written(b"x") is True and as_written(b"") is False
    assert compile_pattern(b"", star_matches_empty=False)(b"") is True


def test_pathological_pattern_is_fast() -> None:
    pattern = compile_pattern(b"a*" * 50 + b"b")
    assert pattern(b"a" * 5000) is False  # iterative: no exponential backtracking


