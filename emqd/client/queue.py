"""`Queue` (asyncio) and `SyncQueue` (blocking): the operations of commands.py over redis-py.

Both classes get their methods from one table, `_METHODS`, wrapped by a driver
that runs the operation's generator: one round trip per batch (a single
command as itself, several as one non-transactional pipeline). So there is one
definition of what is sent and how replies are read, and two thin ways to wait.

redis-py's own retries are switched off: a CLAIM retried blindly after a lost
reply would claim more jobs than asked, so reconnecting is the caller's
decision (the Worker backs off and resynchronises its leases first).
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.retry import Retry as SyncRetry

from emqd.client.commands import Command, Operation, QueueCommands

DEFAULT_URL = "redis://127.0.0.1:6390"
URL_ENV = "EMQD_URL"


def resolve_url(url: str | None) -> str:
    """`url`, else $EMQD_URL, else emqd's default address."""
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


def redacted(url: str) -> str:
    """The URL with its password masked, for logs and messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


def _async_method(build: Callable[..., Operation[Any]]) -> Callable[..., Any]:
    @functools.wraps(build)
    async def method(self: Queue, *args: Any, **kwargs: Any) -> Any:
        return await self.execute(build(self.commands, *args, **kwargs))
    return method


def _sync_method(build: Callable[..., Operation[Any]]) -> Callable[..., Any]:
    @functools.wraps(build)
    def method(self: SyncQueue, *args: Any, **kwargs: Any) -> Any:
        return self.execute(build(self.commands, *args, **kwargs))
    return method


_METHODS = ("add", "add_json", "add_many", "get", "stats", "revive", "remove", "pause",
            "resume", "dead", "get_config", "set_config", "queues", "lanes", "set_lane_limit",
            "promote", "ping", "claim", "complete", "fail", "requeue", "extend")


def _with_methods(
        wrap: Callable[[Callable[..., Operation[Any]]], Callable[..., Any]]
) -> Callable[[type], type]:
    def decorate(cls: type) -> type:
        for name in _METHODS:
            setattr(cls, name, wrap(getattr(QueueCommands, name)))
        return cls
    return decorate


@_with_methods(_async_method)
class Queue:
    """An emqd queue for asyncio code: `await Queue("mail").add(b"hi")`.

    Methods: add, add_json, add_many, get, stats, revive, remove, pause, resume,
    dead, get_config, set_config, queues, lanes, set_lane_limit, promote, ping,
    and for consumers claim, complete, fail, requeue, extend (the Worker uses
    those). `name` may be bytes. A blocking claim holds one pooled connection while it
    waits; the others go on over the rest of the pool.
    """

    def __init__(self, name: str | bytes, url: str | None = None,
                 **redis_options: Any) -> None:
        self.commands = QueueCommands(name)
        self.name = self.commands.name
        self.url = resolve_url(url)
        self.client = redis.asyncio.Redis.from_url(
            self.url, **{"retry": AsyncRetry(NoBackoff(), 0), **redis_options})

    async def execute(self, operation: Operation[Any]) -> Any:
        try:
            batch = next(operation)
            while True:
                batch = operation.send(await self._round_trip(batch))
        except StopIteration as done:
            return done.value

    async def _round_trip(self, batch: list[Command]) -> list[Any]:
        if len(batch) == 1:
            try:
                return [await self.client.execute_command(*batch[0])]
            except ResponseError as error:
                return [error]
        pipe = self.client.pipeline(transaction=False)
        for command in batch:
            pipe.execute_command(*command)
        return await pipe.execute(raise_on_error=False)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, url={redacted(self.url)!r})"


@_with_methods(_sync_method)
class SyncQueue:
    """The same queue for blocking code (producers in a web view, scripts):
    the methods of `Queue`, without `await`."""

    def __init__(self, name: str | bytes, url: str | None = None,
                 **redis_options: Any) -> None:
        self.commands = QueueCommands(name)
        self.name = self.commands.name
        self.url = resolve_url(url)
        self.client = redis.Redis.from_url(
            self.url, **{"retry": SyncRetry(NoBackoff(), 0), **redis_options})

    def execute(self, operation: Operation[Any]) -> Any:
        try:
            batch = next(operation)
            while True:
                batch = operation.send(self._round_trip(batch))
        except StopIteration as done:
            return done.value

    def _round_trip(self, batch: list[Command]) -> list[Any]:
        if len(batch) == 1:
            try:
                return [self.client.execute_command(*batch[0])]
            except ResponseError as error:
                return [error]
        pipe = self.client.pipeline(transaction=False)
        for command in batch:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncQueue({self.name!r}, url={redacted(self.url)!r})"
