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

import asyncio
import functools
import logging
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.retry import Retry as SyncRetry

from emqd.client.commands import Command, Operation, QueueCommands, QueueEvent
from emqd.client.errors import TRANSPORT_ERRORS
from emqd.client.reconnect import Backoff

log = logging.getLogger("emqd.client")

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


_METHODS = ("add", "add_json", "add_many", "add_unique", "add_and_wait", "wait", "logs", "get",
            "stats", "revive", "remove", "pause", "resume", "dead", "get_config", "set_config",
            "queues", "lanes", "set_lane_limit", "set_rate", "clear_rate", "set_lane_rate",
            "clear_lane_rate", "flow", "children", "repeat", "delete_repeat", "repeats",
            "promote", "ping", "claim", "complete", "fail", "requeue", "extend", "progress", "log")


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

    Methods: add, add_json, add_many, add_and_wait, wait, logs, get, stats, revive,
    remove, pause, resume, dead, get_config, set_config, queues, lanes, set_lane_limit,
    promote, ping, and for consumers claim, complete, fail, requeue, extend, progress, log
    (the Worker uses those); `events()` iterates over the queue's events. `name` may be
    bytes. A blocking claim (or wait) holds one pooled connection while it waits; the
    others go on over the rest of the pool.
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

    async def events(self) -> AsyncIterator[QueueEvent]:
        """The queue's events as they happen (`emq:{name}:events`, protocol section 16),
        parsed, for ever: `async for event in queue.events(): ...`.

        It subscribes on a connection of its own and, when that connection is lost,
        tries again (backing off 50 ms doubling to 2 s, logged on `emqd.client`):
        redis-py's PubSub reconnects and subscribes again on the next read, so one
        PubSub serves the whole iteration and is never subscribed twice. Pub/Sub keeps
        nothing: what was published while it was away is not delivered. Leave the
        loop (`break`) or cancel the task to stop; the connection is closed.
        """
        backoff = Backoff()
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            while True:
                try:
                    if not pubsub.subscribed:  # the first time, or a first attempt failed
                        await pubsub.subscribe(self.commands.events_channel)
                    async for message in pubsub.listen():
                        backoff.reset()
                        if message["type"] == "message":
                            yield QueueEvent.parse(message["data"])
                except TRANSPORT_ERRORS as error:
                    delay = backoff.next()
                    log.warning("events of %r: connection lost (%s); trying again in %.2f s",
                                self, error, delay)
                    await asyncio.sleep(delay)
        finally:
            await pubsub.aclose()

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
