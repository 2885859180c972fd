"""Fuzzing every command's argument parsing: random argv for each row of the command table.

Each example runs one request through `dispatch.execute` on an in-memory
`Core` (no log) whose keyspace holds a hash, a sorted set and a queue
with pending, scheduled, active and lane jobs. The arguments are drawn from
the words that row takes (its tokens in COMMAND DOCS, emqd/commands/docs.py),
the keys and ids that exist, numbers at and past every edge, and any bytes.
Whatever comes, the answer must be a reply value or a `ReplyError`, which the
codec can encode in RESP2 and RESP3: never another exception, never a hang
(hypothesis's deadline). `EMQD_FUZZ_EXAMPLES` scales the examples per row.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emqd.commands.docs import ARGUMENTS
from emqd.commit.plan import Block
from emqd.config import Config
from emqd.core import Core, Session
from emqd.dispatch import SUBTABLES, TABLE, execute
from emqd.wire.resp import encode
from tests.syntax import tokens

EXAMPLES = int(os.environ.get("EMQD_FUZZ_EXAMPLES", "12"))

SEED = [
    [b"HSET", b"h", b"f", b"v", b"n", b"10"],
    [b"ZADD", b"z", b"1", b"a", b"2.5", b"b", b"-inf", b"c"],
    [b"EMQ.ADD", b"q", b"one"],
    [b"EMQ.ADD", b"q", b"two", b"PRIORITY", b"5", b"MAXATTEMPTS", b"1"],
    [b"EMQ.ADD", b"q", b"later", b"DELAY", b"60000"],
    [b"EMQ.ADD", b"q", b"lane", b"GROUP", b"g"],
    [b"EMQ.CLAIM", b"q", b"30000"],
    [b"EMQ.ADD", b"q", b"left", b"ID", b"job-x"],
]

NUMBERS = [b"0", b"1", b"-1", b"2", b"3", b"1000", b"-1000", b"1001", b"9223372036854775807",
           b"9223372036854775808", b"-9223372036854775808", b"-9223372036854775809",
           b"18446744073709551615", b"2147483648", b"1e308", b"1e309", b"inf", b"-inf", b"+inf",
           b"nan", b"0.5", b"-0", b"+5", b" 1", b"1 ", b"0x10", b"", b"01", b"1.0", b"(1",
           b"[a", b"-", b"+"]
WORDS = [b"h", b"z", b"q", b"g", b"f", b"a", b"nope", b"emq:{q}:pending", b"emq:{q}:job:1",
         b"emq:queues", b"job-x", b"*", b"h*", b"[a-", b"\\", b"fixed:1000", b"exp:1:2",
         b"exp:100:10", b"max_attempts", b"backoff", b"lane_limit", b"{q}", b"q" * 300]


def _rows() -> list[tuple[list[bytes], Any]]:
    """(the words that name the row, the row) for every command and subcommand."""
    rows = []
    for name, row in TABLE.items():
        rows.append(([name], row))
        for sub, subrow in SUBTABLES.get(name, {}).items():
            rows.append(([name, sub], subrow))
    return rows


ROWS = _rows()


def _state() -> tuple[Core, Session]:
    state = Core(Config(appendonly=False))
    session = Session(state)
    for request in SEED:
        assert not isinstance(execute(session, request), Exception), request
    return state, Session(state)


def _case(word: bytes) -> st.SearchStrategy[bytes]:
    return st.sampled_from([word, word.lower(), word.upper(), word.capitalize()])


def _arguments(row: Any) -> st.SearchStrategy[list[bytes]]:
    words = sorted(tokens(ARGUMENTS.get(row.name, [])))
    choices = [st.sampled_from(NUMBERS), st.sampled_from(WORDS), st.binary(max_size=12)]
    if words:
        choices += [st.sampled_from(words).flatmap(_case)] * 2
    return st.lists(st.one_of(choices), max_size=9)


def _accepts(reply: Any) -> None:
    """A reply the codec can send, in both protocols."""
    if type(reply) is Block:
        return  # a parked request: the connection answers it later
    assert not isinstance(reply, BaseException) or type(reply).__name__ == "ReplyError", reply
    encode(reply, 2)
    encode(reply, 3)


@pytest.mark.parametrize(("names", "row"), ROWS, ids=[row.name for _, row in ROWS])
def test_any_arguments_get_a_reply_or_a_refusal(names: list[bytes], row: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=1000, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.tuples(*map(_case, names)), _arguments(row), st.booleans())
    def run(spelled: tuple[bytes, ...], args: list[bytes], in_multi: bool) -> None:
        _, session = _state()
        if in_multi:
            assert execute(session, [b"MULTI"]) == "OK"
        _accepts(execute(session, [*spelled, *args]))
        if in_multi:
            _accepts(execute(session, [b"EXEC"]))

    run()
