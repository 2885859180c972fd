"""tests/syntax.py reads the arguments table as Redis does: its rendering is redis.io's, its
matcher takes what the syntax allows and nothing else."""

from __future__ import annotations

import pytest

from emqd.commands import docs
from emqd.commands.docs import ARGUMENTS
from tests.syntax import matches, render

# redis.io's syntax lines for Redis 7.0's commands, whose arguments the table holds
# byte for byte as a redis-server gives them (tests/commands/test_docs.py).
REDIS_IO = {
    "del": "DEL key [key ...]",
    "auth": "AUTH [username] password",
    "hello": "HELLO [protover [AUTH username password] [SETNAME clientname]]",
    "scan": "SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]",
    "flushall": "FLUSHALL [ASYNC | SYNC]",
    "client|list": "CLIENT LIST [TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] "
                   "[ID client-id [client-id ...]]",
    "client|setinfo": "CLIENT SETINFO <LIB-NAME libname | LIB-VER libver>",
    "zadd": "ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]",
    "zrange": "ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]",
    "zrangebyscore": "ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]",
    "unsubscribe": "UNSUBSCRIBE [channel [channel ...]]",
    "config|set": "CONFIG SET parameter value [parameter value ...]",
    "shutdown": "SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]",
    "function|restore": "FUNCTION RESTORE serialized-value [FLUSH | APPEND | REPLACE]",
    "function|list": "FUNCTION LIST [LIBRARYNAME library-name-pattern] [WITHCODE]",
    "fcall": "FCALL function numkeys [key [key ...]] [arg [arg ...]]",
}

# SORT's GET repeats with its token, ZUNION's WEIGHTS without it (redis.io's lines).
SORT_GET = [docs.string("pattern", token="GET", optional=True, multiple=True,
                        multiple_token=True)]
WEIGHTS = [docs.integer("weight", token="WEIGHTS", optional=True, multiple=True)]
# A repeated block that opens with a token repeats as that token (EMQ.FLOW's CHILD).
CHILDREN = docs.block("child", docs.string("queue", token="CHILD"), docs.string("payload"),
                      docs.integer("under", token="UNDER", optional=True), multiple=True)


@pytest.mark.parametrize(("name", "line"), REDIS_IO.items())
def test_a_redis_command_renders_as_redis_io_writes_it(name: str, line: str) -> None:
    assert render(name, ARGUMENTS[name]) == line


def test_a_repeated_token_is_written_with_each_repetition_only_when_it_repeats() -> None:
    assert render("sort", SORT_GET) == "SORT [GET pattern [GET pattern ...]]"
    assert render("zunion", WEIGHTS) == "ZUNION [WEIGHTS weight [weight ...]]"
    assert render("x", [CHILDREN]) == "X CHILD queue payload [UNDER under] [CHILD ...]"


def _argv(line: str) -> list[bytes]:
    return [word.encode() for word in line.split()]


@pytest.mark.parametrize(("name", "argv", "ok"), [
    ("zadd", "k 1 a", True),
    ("zadd", "k nx gt ch 1 a 2.5 b", True),
    ("zadd", "k NX XX 1 a", False),  # one of a choice
    ("zadd", "k CH NX 1 a", False),  # the table's order
    ("zadd", "k 1", False),
    ("zadd", "k 1 a 2", False),  # a block repeats whole
    ("zadd", "k x a", False),  # a double
    ("client|list", "", True),
    ("client|list", "TYPE pubsub ID 1 2 3", True),
    ("client|list", "TYPE", False),
    ("client|list", "TYPE normal master", False),
    ("client|list", "ID", False),
    ("client|list", "ID 1 x", False),  # an integer
    ("hello", "", True),
    ("hello", "3 AUTH u p SETNAME n", True),
    ("hello", "AUTH u p", False),  # the block's first part is not optional
    ("hello", "3 AUTH u", False),
    ("config|set", "a 1 b 2", True),
    ("config|set", "a 1 b", False),
    ("fcall", "f 0", True),
    ("fcall", "f 2 k1 k2 a1", True),
    ("emq.config", "q GET", True),
    ("emq.config", "q get f", True),
    ("emq.config", "q GET f g", False),
    ("emq.config", "q SET f v g w", True),
    ("emq.config", "q SET", False),
    ("emq.config", "q SET f", False),
    ("emq.config", "q PUT f v", False),
])
def test_the_matcher_takes_what_the_syntax_allows(name: str, argv: str, ok: bool) -> None:
    assert matches(_argv(argv), ARGUMENTS[name]) is ok


@pytest.mark.parametrize(("arguments", "argv", "ok"), [
    (SORT_GET, "", True),
    (SORT_GET, "GET a GET b", True),
    (SORT_GET, "GET a b", False),
    (WEIGHTS, "WEIGHTS 1 2", True),
    (WEIGHTS, "WEIGHTS 1 WEIGHTS 2", False),
    ([CHILDREN], "CHILD q p", True),
    ([CHILDREN], "CHILD q p UNDER 0 CHILD r s UNDER 1 CHILD t u", True),
    ([CHILDREN], "", False),
    ([CHILDREN], "CHILD q p r", False),
    ([CHILDREN], "CHILD q p UNDER", False),
])
def test_a_repeated_token_matches_only_where_it_repeats(arguments: list, argv: str,
                                                       ok: bool) -> None:
    assert matches(_argv(argv), arguments) is ok
