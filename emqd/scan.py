"""The SCAN family's shared rules: options, Redis's glob, and cursors over big collections.

HSCAN and ZSCAN (and SCAN / KEYS, which can reuse this) answer as Redis 7.0:

- `parse_options` reads `[MATCH pattern] [COUNT n]` as scanGenericCommand
  does: any order, repeatable (the last wins), COUNT a string2ll integer
  (`ERR value is not an integer or out of range`) of at least 1 (`ERR syntax
  error` otherwise); `MATCH *` filters nothing.
- `Pattern` is Redis's stringmatchlen (util.c) with its corners: `\\` escapes,
  `[^a-z]` classes whose ranges may be written backwards and compare bytes as
  signed chars, an unclosed `[` running to the end, and an empty string that
  matches only the empty pattern (`*` does not match it). Matching is
  iterative (one remembered star), so no pattern can make it exponential.
- `walk` is the cursor for a collection Redis holds as a hashtable: members in
  order of a 63-bit hash, the cursor being the next hash to visit. A member
  present for the whole iteration is returned exactly once whatever is added
  or removed meanwhile, and every call moves the cursor forward, so the walk
  ends. Each call costs O(n); small collections never walk (Redis returns a
  listpack whole, with cursor 0, and so does emqd).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from emqd.errors import NOT_INTEGER, SYNTAX
from emqd.numbers import parse_int

DEFAULT_COUNT = 10
_HASH_MASK = 2**63 - 1

_STAR = None
_ANY = -1  # `?`


class Pattern:
    """A compiled Redis glob pattern; `matches(data)` is stringmatchlen(pattern, data, nocase=0)."""

    __slots__ = ("tokens", "empty")

    def __init__(self, pattern: bytes) -> None:
        self.tokens = _compile(pattern)
        self.empty = not pattern

    def matches(self, data: bytes) -> bool:
        tokens = self.tokens
        if not data:
            return self.empty
        ntok = len(tokens)
        t = i = 0
        star_t = -1
        star_i = 0
        n = len(data)
        while i < n:
            if t < ntok:
                token = tokens[t]
                if token is _STAR:
                    star_t, star_i = t, i
                    t += 1
                    continue
                c = data[i]
                if token == _ANY or token == c or (type(token) is frozenset and c in token):
                    t += 1
                    i += 1
                    continue
            if star_t < 0:
                return False
            star_i += 1
            i = star_i
            t = star_t + 1
        while t < ntok and tokens[t] is _STAR:
            t += 1
        return t == ntok


def _signed(c: int) -> int:
    return c - 256 if c >= 128 else c


def _compile(p: bytes) -> list:
    """Tokens: None for `*`, _ANY for `?`, an int for one byte, a frozenset for a class."""
    tokens: list = []
    n = len(p)
    i = 0
    while i < n:
        c = p[i]
        if c == 42:  # *
            while i + 1 < n and p[i + 1] == 42:
                i += 1
            tokens.append(_STAR)
        elif c == 63:  # ?
            tokens.append(_ANY)
        elif c == 91:  # [
            i, token = _compile_class(p, i + 1)
            tokens.append(token)
        elif c == 92 and n - i >= 2:  # backslash escapes the next byte
            i += 1
            tokens.append(p[i])
        else:
            tokens.append(c)
        i += 1
    return tokens


def _compile_class(p: bytes, i: int) -> tuple[int, frozenset]:
    """The bytes a `[...]` class matches, and the index of its last pattern byte."""
    n = len(p)
    negate = i < n and p[i] == 94  # ^
    if negate:
        i += 1
    chosen: set[int] = set()
    while True:
        c = p[i] if i < n else 0  # C reads the terminating NUL past the end
        if c == 92 and n - i >= 2:
            i += 1
            chosen.add(p[i])
        elif c == 93 and i < n:  # ]
            break
        elif i >= n:
            i -= 1
            break
        elif n - i >= 3 and p[i + 1] == 45:  # a-z
            low, high = _signed(p[i]), _signed(p[i + 2])
            if low > high:
                low, high = high, low
            chosen.update(b for b in range(256) if low <= _signed(b) <= high)
            i += 2
        else:
            chosen.add(c)
        i += 1
    if negate:
        chosen = set(range(256)) - chosen
    return i, frozenset(chosen)


def parse_options(argv: list[bytes], start: int) -> tuple[int, Pattern | None]:
    """(count, pattern or None) from `argv[start:]`; raises Redis's errors."""
    count = DEFAULT_COUNT
    pattern: Pattern | None = None
    i = start
    while i < len(argv):
        option = argv[i].lower()
        if option == b"count" and len(argv) - i >= 2:
            number = parse_int(argv[i + 1])
            if number is None:
                raise NOT_INTEGER
            if number < 1:
                raise SYNTAX
            count = number
        elif option == b"match" and len(argv) - i >= 2:
            pattern = None if argv[i + 1] == b"*" else Pattern(argv[i + 1])
        else:
            raise SYNTAX
        i += 2
    return count, pattern


def member_hash(member: bytes) -> int:
    """The 63-bit position of `member` in a walk (stable for the life of the process)."""
    return hash(member) & _HASH_MASK


def walk(members: Iterable[bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """The next cursor (0 when done) and about `count` members whose hash is >= `cursor`.

    Members sharing one hash are always returned together, so a cursor never
    falls between them.
    """
    candidates = [(h, m) for m in members if (h := hash(m) & _HASH_MASK) >= cursor]
    if len(candidates) <= count:
        return 0, [m for _, m in candidates]
    chosen = heapq.nsmallest(count + 1, candidates)
    limit = chosen[-1][0]
    picked = [m for h, m in chosen if h < limit]
    if picked:
        return limit, picked
    # every member chosen shares one hash: return that whole hash at once
    picked = [m for h, m in candidates if h == limit]
    later = [h for h, _ in candidates if h > limit]
    return (min(later) if later else 0), picked
