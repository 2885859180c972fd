"""Redis's glob patterns (`stringmatchlen`).

For KEYS, SCAN MATCH, CONFIG GET, HSCAN, ZSCAN and Pub/Sub.

`*` any run of bytes, `?` one byte, `[abc]` / `[^abc]` / `[a-z]` a class
(a reversed range is swapped; an unclosed class runs to the pattern's end),
`\\x` the byte x itself. Bytes are compared exactly (no case folding).

The pattern is compiled once into tokens, then matched with one-star
backtracking, which is linear-time per star and gives the same answers as
Redis's recursive matcher; an empty string matches only the empty pattern,
as in Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_STAR = object()
_ANY = object()


class _Class:
    __slots__ = ("negate", "bytes_", "ranges")

    def __init__(self, negate: bool) -> None:
        self.negate = negate
        self.bytes_: set[int] = set()
        self.ranges: list[tuple[int, int]] = []

    def matches(self, c: int) -> bool:
        signed = _signed(c)
        hit = c in self.bytes_ or any(lo <= signed <= hi for lo, hi in self.ranges)
        return hit != self.negate


def _signed(c: int) -> int:
    """A byte as Redis compares it in a range: a C char, signed on x86, so bytes
    0x80..0xff sort below 0x00 and a range from `a` to byte 0xff holds byte 0x00."""
    return c - 256 if c >= 128 else c


def _tokens(pattern: bytes) -> list[Any]:
    """Walk the pattern exactly as stringmatchlen does."""
    tokens: list[Any] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == 42:  # *
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
        elif c == 63:  # ?
            tokens.append(_ANY)
        elif c == 91:  # [
            i += 1
            cls = _Class(i < n and pattern[i] == 94)  # ^
            if cls.negate:
                i += 1
            while True:
                if i < n and pattern[i] == 92 and n - i >= 2:  # backslash
                    i += 1
                    cls.bytes_.add(pattern[i])
                elif i < n and pattern[i] == 93:  # ]
                    break
                elif i >= n:
                    i -= 1
                    break
                elif n - i >= 3 and pattern[i + 1] == 45:  # -
                    lo, hi = sorted((_signed(pattern[i]), _signed(pattern[i + 2])))
                    cls.ranges.append((lo, hi))
                    i += 2
                else:
                    cls.bytes_.add(pattern[i])
                i += 1
            tokens.append(cls)
        else:
            if c == 92 and n - i >= 2:  # backslash escapes the next byte
                i += 1
            tokens.append(pattern[i])
        i += 1
    return tokens


def compile_pattern(pattern: bytes, *, star_matches_empty: bool = True) -> Callable[[bytes], bool]:
    """A predicate telling whether a string matches `pattern`.

    KEYS, SCAN and CONFIG GET take a lone `*` as "everything" before matching,
    so it even lists the empty key; Pub/Sub (PSUBSCRIBE, PUBSUB CHANNELS)
    matches it as written, where `*` needs at least one byte: pass
    `star_matches_empty=False` for that.
    """
    if pattern == b"*":
        return (lambda s: True) if star_matches_empty else (lambda s: bool(s))
    tokens = _tokens(pattern)
    if all(type(t) is int for t in tokens):
        literal = bytes(tokens)
        return lambda s: s == literal and bool(s or not pattern)
    if tokens[-1] is _STAR and all(type(t) is int for t in tokens[:-1]):
        prefix = bytes(tokens[:-1])
        return lambda s: bool(s) and s.startswith(prefix)
    return lambda s: _match(tokens, s) if s else not pattern


def _one(token: Any, c: int) -> bool:
    if type(token) is int:
        return token == c
    if token is _ANY:
        return True
    return bool(token.matches(c))


def _match(tokens: list[Any], s: bytes) -> bool:
    ti = si = 0
    star_ti, star_si = -1, 0
    nt, ns = len(tokens), len(s)
    while si < ns:
        if ti < nt and tokens[ti] is _STAR:
            star_ti, star_si = ti, si
            ti += 1
        elif ti < nt and _one(tokens[ti], s[si]):
            ti += 1
            si += 1
        elif star_ti >= 0:
            star_si += 1
            si = star_si
            ti = star_ti + 1
        else:
            return False
    while ti < nt and tokens[ti] is _STAR:
        ti += 1
    return ti == nt
