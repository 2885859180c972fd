"""Send the same commands to emqd and to the reference redis-server; compare raw replies.

`Pair` holds one raw connection to each server. `same(argv)` sends a command
to both and requires identical reply bytes. Where the protocol (section 7)
lets emqd list in another order, the comparison parses both replies and
compares them as collections instead:

- HGETALL / HKEYS / HVALS of a hash the reference holds as a hashtable
  (more than 128 fields, or a value over 64 bytes);
- HSCAN / ZSCAN of a hash or sorted set the reference holds as a hashtable
  or skiplist: both sides are walked to cursor 0 with the same options and
  the element sets compared.

The reference is asked (OBJECT ENCODING) which case applies, so the
comparison is exact everywhere Redis itself is deterministic.
On a mismatch the assertion names the seed, the step and the last commands.
"""

from __future__ import annotations

from typing import Any

from tests.support import RawClient

EXACT, UNORDERED, SCAN = "exact", "unordered", "scan"
MAX_SCAN_CALLS = 5000


def parse(data: bytes) -> Any:
    """A RESP2/RESP3 reply as (type byte, value) pairs, nested for arrays, sets and maps."""
    value, end = _parse(data, 0)
    if end != len(data):
        raise ValueError(f"trailing bytes after a reply: {data[end:]!r}")
    return value


def _parse(data: bytes, pos: int) -> tuple[Any, int]:
    line_end = data.index(b"\r\n", pos)
    kind, head = data[pos : pos + 1], data[pos + 1 : line_end]
    pos = line_end + 2
    if kind in (b"$", b"=", b"!"):
        size = int(head)
        if size < 0:
            return (b"$", None), pos
        return (kind, data[pos : pos + size]), pos + size + 2
    if kind in (b"*", b"~", b"%", b">", b"|"):
        count = int(head)
        if count < 0:
            return (kind, None), pos
        if kind in (b"%", b"|"):
            count *= 2
        items = []
        for _ in range(count):
            item, pos = _parse(data, pos)
            items.append(item)
        return (kind, items), pos
    return (kind, head), pos


class Pair:
    """One connection to emqd and one to the reference, fed the same commands."""

    def __init__(self, emqd_port: int, redis_port: int, resp: int = 2, label: str = "") -> None:
        self.emqd = RawClient(emqd_port)
        self.redis = RawClient(redis_port)
        self.label = label
        self.history: list[tuple] = []
        if resp == 3:
            for client in (self.emqd, self.redis):
                reply = client.command("HELLO", "3")
                assert reply.startswith(b"%"), reply

    def close(self) -> None:
        self.emqd.close()
        self.redis.close()

    def _fail(self, what: str, argv: tuple, mine: Any, theirs: Any) -> None:
        recent = "\n".join("    " + _show(a) for a in self.history[-12:])
        raise AssertionError(
            f"{self.label} step {len(self.history)}: {what} differs for {_show(argv)}\n"
            f"  emqd : {mine!r}\n  redis: {theirs!r}\n  last commands:\n{recent}"
        )

    def both(self, *argv: bytes | str | int) -> tuple[bytes, bytes]:
        """Send to both; return (emqd reply, redis reply) without comparing."""
        self.history.append(argv)
        return self.emqd.command(*argv), self.redis.command(*argv)

    def same(self, *argv: bytes | str | int) -> bytes:
        """Send to both and require byte-identical replies."""
        mine, theirs = self.both(*argv)
        if mine != theirs:
            self._fail("reply", argv, mine, theirs)
        return theirs

    def encoding(self, key: bytes | str) -> bytes:
        """The reference's internal encoding of `key` (b"" when it does not exist)."""
        reply = parse(self.redis.command("OBJECT", "ENCODING", key))
        return reply[1] or b""

    def check(self, kind: str, argv: tuple) -> None:
        """Compare one command as `kind` (EXACT, UNORDERED or SCAN) allows."""
        if kind == EXACT:
            self.same(*argv)
            return
        key = argv[1] if len(argv) > 1 else b""
        ordered = self.encoding(key) in (b"listpack", b"")
        mine, theirs = self.both(*argv)
        if ordered or mine[:1] == b"-" or theirs[:1] == b"-":
            if mine != theirs:
                self._fail("reply", argv, mine, theirs)
            return
        if kind == UNORDERED:
            pairs = argv[0].lower() in (b"hgetall", "hgetall")
            if _unordered(parse(mine), pairs) != _unordered(parse(theirs), pairs):
                self._fail("reply (as a collection)", argv, mine, theirs)
            return
        mine_all = self.scan_all(self.emqd, argv)
        theirs_all = self.scan_all(self.redis, argv)
        if mine_all != theirs_all:
            self._fail("full scan", argv, sorted(mine_all), sorted(theirs_all))

    def scan_all(self, client: RawClient, argv: tuple) -> set[tuple[bytes, bytes]]:
        """Walk HSCAN/ZSCAN `argv` (its options kept) from cursor 0 to 0: the pairs seen."""
        cursor = b"0"
        seen: set[tuple[bytes, bytes]] = set()
        for _ in range(MAX_SCAN_CALLS):
            reply = parse(client.command(argv[0], argv[1], cursor, *argv[3:]))
            (_, (cursor_item, items)) = reply
            cursor = cursor_item[1]
            flat = [value for _, value in items[1]]
            seen.update(zip(flat[::2], flat[1::2], strict=True))
            if cursor == b"0":
                return seen
        raise AssertionError(f"{self.label}: {_show(argv)} did not reach cursor 0")


def replay(emqd_port: int, redis_port: int, resp: int, label: str, steps: list[tuple]) -> None:
    """FLUSHALL, then every step on both servers, each reply byte for byte."""
    pair = Pair(emqd_port, redis_port, resp, label=label)
    try:
        pair.same("FLUSHALL")
        for argv in steps:
            pair.same(*argv)
    finally:
        pair.close()


def _unordered(reply: Any, pairs: bool) -> Any:
    """A map or array reply as a sorted list (of field/value pairs when `pairs`)."""
    kind, value = reply
    if kind not in (b"%", b"*") or value is None:
        return reply
    items = [item[1] for item in value]
    if pairs:
        return kind, sorted(zip(items[::2], items[1::2], strict=True))
    return kind, sorted(items)


def _show(argv: tuple) -> str:
    return " ".join(repr(a if isinstance(a, bytes) else str(a).encode())[1:] for a in argv)
