"""What SCAN, HSCAN and ZSCAN share: their cursor and options, and a walk over big
collections.

They answer as Redis 7.0:

- `parse_options` reads `[MATCH pattern] [COUNT n]` as scanGenericCommand
  does: any order, repeatable (the last wins), COUNT a string2ll integer
  (`ERR value is not an integer or out of range`) of at least 1 (`ERR syntax
  error` otherwise); `MATCH *` filters nothing; any other pattern is Redis's
  glob (`emqd/glob.py`), under which an empty member matches only `MATCH ""`.
- `walk` is the cursor for a collection Redis holds as a hashtable: members in
  order of a 63-bit hash, the cursor being the next hash to visit. A member
  present for the whole iteration is returned exactly once whatever is added
  or removed meanwhile, and every call moves the cursor forward, so the walk
  ends. Each call costs O(n); small collections never walk (Redis returns a
  listpack whole, with cursor 0, and so does emqd).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from emqd.errors import INVALID_CURSOR, NOT_INTEGER, SYNTAX
from emqd.glob import compile_pattern
from emqd.numbers import parse_cursor, parse_int

Matcher = Callable[[bytes], bool]

DEFAULT_COUNT = 10
_HASH_MASK = 2**63 - 1


def cursor_arg(arg: bytes) -> int:
    """The cursor argument of SCAN / HSCAN / ZSCAN; `ERR invalid cursor` (checked first,
    before the key's type) when it is not one."""
    cursor = parse_cursor(arg)
    if cursor is None:
        raise INVALID_CURSOR()
    return cursor


def parse_options(argv: list[bytes], start: int) -> tuple[int, Matcher | None]:
    """(count, a MATCH predicate or None) from `argv[start:]`; raises Redis's errors."""
    count = DEFAULT_COUNT
    pattern: Matcher | None = None
    i = start
    while i < len(argv):
        option = argv[i].lower()
        if option == b"count" and len(argv) - i >= 2:
            number = parse_int(argv[i + 1])
            if number is None:
                raise NOT_INTEGER()
            if number < 1:
                raise SYNTAX()
            count = number
        elif option == b"match" and len(argv) - i >= 2:
            pattern = None if argv[i + 1] == b"*" else compile_pattern(argv[i + 1])
        else:
            raise SYNTAX()
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
