"""errors.py: a refusal is a fresh exception every time, and keeps nothing alive."""

from __future__ import annotations

import pytest

from emqd import errors
from emqd.config import Config
from emqd.core import Core, Session
from emqd.dispatch import execute
from emqd.errors import Refusal, ReplyError


def test_a_refusal_cannot_be_raised_as_is() -> None:
    with pytest.raises(TypeError):
        raise errors.SYNTAX  # type: ignore[misc]


def test_each_call_is_a_new_exception_equal_to_the_refusal() -> None:
    first, second = errors.STALE_GONE(), errors.STALE_GONE()
    assert first is not second
    assert first == second == errors.STALE_GONE
    assert isinstance(first, ReplyError) and not isinstance(errors.STALE_GONE, BaseException)
    assert Refusal(b"ERR x") == ReplyError(b"ERR x") != Refusal(b"ERR y")


def test_refused_commands_answer_errors_without_a_traceback() -> None:
    """The leak of issue 12 #1: each raise of one shared instance prepended its frames to the
    same `__traceback__`, keeping every refused request's argv alive."""
    session = Session(Core(Config(appendonly=False)))
    replies = [execute(session, [b"EMQ.COMPLETE", b"q", b"1", b"1"]) for _ in range(3)]
    replies += [execute(session, [b"EMQ.ADD", b"q{", b"x" * 1000]) for _ in range(3)]
    assert replies[:3] == [errors.STALE_GONE] * 3 and replies[3:] == [errors.INVALID_QUEUE] * 3
    assert len({id(reply) for reply in replies}) == len(replies)
    assert all(reply.__traceback__ is None for reply in replies)
