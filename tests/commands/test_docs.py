"""COMMAND DOCS carries every command's arguments (emqd/commands/docs.py), Redis's own
for the plain commands, byte for byte; and the table agrees with the command table."""

from __future__ import annotations

from typing import Any

import hiredis
import pytest

from emqd.commands.docs import ARGUMENTS
from emqd.dispatch import SUBTABLES, TABLE
from tests.support import RawClient, map_elements
from tests.syntax import words

# Where emqd accepts less than Redis, its hints say so (docs/SERVER.md).
NARROWER = {"command|list"}  # FILTERBY PATTERN only, not MODULE or ACLCAT
NOT_IN_REDIS_7_0 = {"client|setinfo"}  # Redis 7.2's; emqd answers it (docs/SERVER.md)


def _names() -> list[tuple[str, str | None]]:
    """(command, subcommand full name or None) for every plain Redis row."""
    names: list[tuple[str, str | None]] = []
    for raw in TABLE:
        name = raw.decode()
        if name.startswith("emq."):
            continue
        names.append((name, None))
        names += [(name, row.name) for row in SUBTABLES.get(raw, {}).values()]
    return names


def _docs(client: RawClient, command: str, sub: str | None) -> dict[bytes, bytes]:
    entries = map_elements(client.command("COMMAND", "DOCS", command))[command.encode()]
    docs = map_elements(entries)
    if sub is not None:
        docs = map_elements(map_elements(docs[b"subcommands"])[sub.encode()])
    return docs


@pytest.mark.parametrize("resp", [2, 3])
def test_the_plain_commands_arguments_are_redis_s(emqd_port: int, redis_ref: int,
                                                  resp: int) -> None:
    ours, theirs = RawClient(emqd_port), RawClient(redis_ref)
    try:
        if resp == 3:
            ours.command("HELLO", 3)
            theirs.command("HELLO", 3)
        compared = 0
        for command, sub in _names():
            full = sub or command
            if full in NARROWER | NOT_IN_REDIS_7_0:
                continue
            mine, ref = _docs(ours, command, sub), _docs(theirs, command, sub)
            assert mine.get(b"arguments") == ref.get(b"arguments"), full
            compared += b"arguments" in ref
        assert compared >= 60
    finally:
        ours.close()
        theirs.close()


def _rows() -> dict[str, Any]:
    rows = {name.decode(): row for name, row in TABLE.items()}
    for subtable in SUBTABLES.values():
        rows.update({row.name: row for row in subtable.values()})
    return rows


def test_every_entry_names_a_command_and_fits_its_arity() -> None:
    rows = _rows()
    assert set(ARGUMENTS) <= set(rows)
    for name, arguments in ARGUMENTS.items():
        arity = rows[name].arity
        least, most = words(arguments)
        names = 1 + ("|" in name)  # the command's own name, and a subcommand's
        assert names + least == abs(arity), name  # "at least N": every option left out
        assert (arity > 0) is (least == most), name  # a fixed arity: nothing varies


def test_every_verb_that_takes_arguments_has_its_hints(emqd_port: int) -> None:
    """The verbs are what redis-cli users type most: each one's DOCS has arguments,
    the queue first, as the key the command table names."""
    client = RawClient(emqd_port)
    try:
        for name, row in TABLE.items():
            if not name.startswith(b"emq.") or row.arity == 1 or row.keys == (0, 0, 0):
                continue  # (EMQ.FRONT is a connection's: it names a front, not a queue)
            reader = hiredis.Reader()
            reader.feed(_docs(client, name.decode(), None)[b"arguments"])
            arguments = reader.gets()
            assert len(arguments) == len(ARGUMENTS[name.decode()]), name
            assert arguments[0][:6] == [b"name", b"queue", b"type", b"key",
                                        b"key_spec_index", 0], name
            assert row.keys == (1, 1, 1)
    finally:
        client.close()
