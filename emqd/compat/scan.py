"""What SCAN, HSCAN and ZSCAN share: their cursor and options, and the paging of a big
collection through its index.

They answer as Redis 7.0:

- `parse_options` reads `[MATCH pattern] [COUNT n]` as scanGenericCommand
  does: any order, repeatable (the last wins), COUNT a string2ll integer
  (`ERR value is not an integer or out of range`) of at least 1 (`ERR syntax
  error` otherwise); `MATCH *` filters nothing; any other pattern is Redis's
  glob (`emqd/compat/glob.py`), under which an empty member matches only `MATCH ""`.
- A small collection is answered whole, with cursor 0, whatever the cursor:
  Redis does so for a listpack, and emqd for anything of at most SMALL
  members too (COUNT is a hint), which costs O(SMALL).
- A bigger one is paged by `page`: the cursor is a position in the
  collection's ScanIndex (store/scan_index.py), built by the scan's first
  calls and kept exact by every write while it lives, so a call costs
  O(COUNT) whatever the size; a member present for the whole scan is
  returned exactly once. COUNT is a hint here too: a call visits at most
  MAX_COUNT members, however large a COUNT it is given.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from emqd.compat.glob import compile_pattern
from emqd.compat.numbers import parse_cursor, parse_int
from emqd.errors import INVALID_CURSOR, NOT_INTEGER, SYNTAX
from emqd.store.scan_index import ScanIndex, snapshot_chunks

Matcher = Callable[[bytes], bool]

DEFAULT_COUNT = 10
SMALL = 128  # members of a collection answered whole, in one call
MAX_COUNT = 10_000  # members one call visits at most (about 5 ms with its reply)
BUILD_STEP = 16_384  # members a call adds to an index being built (about 10 ms)
CHUNK = 1024  # members a build's walk reads at a time


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


class Indexed(Protocol):
    """What holds a ScanIndex while it is scanned: the keyspace, a big hash, a sorted set."""

    scan: ScanIndex | None


def page(owner: Indexed, collection: Mapping[bytes, object], cursor: int,
         count: int) -> tuple[int, list[bytes]] | None:
    """The next cursor (0 at the end) and the members of one call over a collection
    whose members are the keys of `collection`; None when it has at most SMALL, to be
    answered whole.

    The first call starts the owner's index from a list of the members; until it is
    built, each call adds BUILD_STEP members to it and answers none, keeping
    the cursor (1 for 0: not the end). The call that reaches the end (or finds
    the collection small) drops the index, so the writes that follow pay
    nothing for it.
    """
    size = len(collection)
    if size <= SMALL:
        owner.scan = None
        return None
    index = owner.scan
    if index is None:
        index = owner.scan = ScanIndex(size, snapshot_chunks(list(collection), CHUNK))
    if not index.build(BUILD_STEP):
        return max(cursor, 1), []
    next_cursor, members = index.page(cursor, min(count, MAX_COUNT))
    if next_cursor == 0:
        owner.scan = None
    return next_cursor, members
