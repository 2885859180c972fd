"""FUNCTION and FCALL answer as a Redis 7.0 with no functions, byte for byte; and the HELPs."""

from __future__ import annotations

import pytest
import redis

from emqd.commands.function import EMPTY_DUMP
from tests.support import RawClient
from tests.wire.compare import same_replies

FUNCTION_REQUESTS = [
    ("FUNCTION", "LIST"), ("FUNCTION", "list", "WITHCODE"),
    ("FUNCTION", "LIST", "LIBRARYNAME", "lib*"),
    ("FUNCTION", "LIST", "withcode", "libraryname", "x"),
    ("FUNCTION", "LIST", "x"), ("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME"),
    ("FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"),
    ("FUNCTION", "LIST", "WITHCODE", "WITHCODE"), ("FUNCTION", "LIST", "bad\r\nname"),
    ("FUNCTION", "FLUSH"), ("FUNCTION", "FLUSH", "ASYNC"), ("FUNCTION", "flush", "sync"),
    ("FUNCTION", "FLUSH", "x"), ("FUNCTION", "flush", "a", "b"),
    ("FUNCTION", "STATS"), ("FUNCTION", "STATS", "x"),
    ("FUNCTION", "DUMP"), ("FUNCTION", "DUMP", "x"),
    ("FUNCTION", "RESTORE", EMPTY_DUMP), ("FUNCTION", "RESTORE", EMPTY_DUMP, "FLUSH"),
    ("FUNCTION", "RESTORE", EMPTY_DUMP, "append"), ("FUNCTION", "RESTORE", EMPTY_DUMP, "REPLACE"),
    ("FUNCTION", "RESTORE", "x"), ("FUNCTION", "RESTORE", "x", "FLUSH"),
    ("FUNCTION", "RESTORE", EMPTY_DUMP, "bad"), ("FUNCTION", "RESTORE", "x", "y", "z"),
    ("FUNCTION", "RESTORE", b"\x0b\x00" + EMPTY_DUMP[2:]), ("FUNCTION", "RESTORE"),
    ("FUNCTION", "DELETE", "x"), ("FUNCTION", "DELETE"), ("FUNCTION", "DELETE", "a", "b"),
    ("FUNCTION", "KILL"), ("FUNCTION", "KILL", "x"),
    ("FUNCTION", "LOAD"), ("FUNCTION", "LOAD", "x"), ("FUNCTION", "LOAD", "REPLACE", "x"),
    ("FUNCTION", "LOAD", "a", "b", "c"), ("FUNCTION", "LOAD", "REPLACE", "REPLACE", "x"),
    ("FUNCTION",), ("FUNCTION", "nope"), ("FUNCTION", "HELP"), ("FUNCTION", "help", "x"),
    ("FCALL", "f", "0"), ("FCALL", "f", "x"), ("FCALL", "f", "1", "k", "a"), ("FCALL", "f"),
    ("FCALL_RO", "f", "0"), ("FCALL_RO",),
    ("MULTI",), ("FUNCTION", "LIST"), ("FUNCTION", "FLUSH"), ("EXEC",),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_function_answers_as_redis_with_no_functions(emqd_port: int, redis_ref: int,
                                                     resp: int) -> None:
    same_replies(emqd_port, redis_ref, FUNCTION_REQUESTS, resp=resp)


@pytest.mark.parametrize("resp", [2, 3])
def test_config_and_client_help_are_redis_s(emqd_port: int, redis_ref: int, resp: int) -> None:
    same_replies(emqd_port, redis_ref, [
        ("CONFIG", "HELP"), ("config", "help"), ("CONFIG", "HELP", "x"),
        ("CLIENT", "HELP"), ("client", "Help"), ("CLIENT", "HELP", "x"),
    ], resp=resp)


def test_the_unknown_subcommand_hint_leads_to_an_answer(emqd_port: int) -> None:
    """`Try CONFIG HELP.` used to be answered by the same refusal again."""
    raw = RawClient(emqd_port)
    try:
        for container in ("CONFIG", "CLIENT", "FUNCTION"):
            refusal = raw.command(container, "nope")
            assert refusal.endswith(f"Try {container} HELP.\r\n".encode())
            assert raw.command(container, "HELP").startswith(b"*")
    finally:
        raw.close()


def test_redis_py_function_helpers(r: redis.Redis, redis_ref: int) -> None:
    """redis-py's helpers read from emqd what they read from a Redis with no functions,
    in whatever shape this redis-py gives them (FUNCTION STATS is a dict in 8.0 and
    8.1, the reply's flat list in 8.2)."""
    with redis.Redis(port=redis_ref) as ref:
        ref.function_flush()
        assert r.function_list() == ref.function_list() == []
        assert r.function_flush() is ref.function_flush() is True
        dump = r.function_dump()
        assert dump == ref.function_dump() == EMPTY_DUMP
        assert r.function_restore(dump) is ref.function_restore(dump) is True
        stats = r.function_stats()
        assert stats == ref.function_stats()
        assert b"running_script" in stats  # a flat list or a dict: the reply was read
    with pytest.raises(redis.ResponseError, match="does not run functions"):
        r.function_load("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
