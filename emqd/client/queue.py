"""`Queue` (asyncio) and `SyncQueue` (blocking): the operations of commands.py over redis-py.

Both classes get their methods from one table, `_METHODS`, wrapped by a driver
that runs the operation's generator: one round trip per batch (a single
command as itself, several as one non-transactional pipeline). So there is one
definition of what is sent and how replies are read, and two thin ways to wait.

redis-py's own retries are switched off: a CLAIM retried blindly after a lost
reply would claim more jobs than asked, and an ADD retried without its id would
make a second job. The queue's own retries are for the batches an operation
marks `Retried`, those that do the same when sent twice (an ADD with the id the
client picked before the first try, a FLOW with its parent's, a WAIT): they
are sent again, backing off, for up to `reconnect_s`, then the operation hears
of the error (`ConnectionLost` names its job); so are they when a cluster's front
answers TRYAGAIN or CLUSTERDOWN (docs/CLUSTER.md: a write not acknowledged).
Everything else raises at once, and reconnecting is the caller's decision (the
Worker backs off and resynchronises its leases first).

The connections have no socket timeout unless given one (redis-py 8's default is
5 s): a WAIT or a CLAIM ... BLOCK holds its connection on purpose for longer.

Given several fronts of a cluster (or one, which names the others), each batch goes
to the front the queue's routes say (emqd/client/routes.py: its owner, else any
front that answers), on a redis-py client of that front's own (`client_for`); a
front is probed before the first request goes there, so moving never sends a
request twice, and the rules above are unchanged: a CLAIM is never sent again, an
ADD only with its ID. `client` is the first URL's (and a single process's only) one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.retry import Retry as SyncRetry

from emqd.client.addresses import given, joined, redacted
from emqd.client.commands import Command, Operation, QueueCommands, QueueEvent, Retried
from emqd.client.errors import NOT_NOW, TRANSPORT_ERRORS, is_permanent
from emqd.client.reconnect import Backoff, Outage, Patience
from emqd.client.routes import Routes, Step

log = logging.getLogger("emqd.client")

RECONNECT_S = 30.0  # how long a Retried batch is sent again over a lost connection
EVENTS_QUIET_S = 1.0  # `events()` asks whether the queue moved after this long without one


def _raise_not_now(replies: list[Any]) -> None:
    """Raise the first "not now" among a Retried batch's replies (it is sent again whole:
    sending it twice does what sending it once does)."""
    for reply in replies:
        if isinstance(reply, NOT_NOW):
            raise reply


def _redis_options(options: dict[str, Any], retry: object) -> dict[str, Any]:
    """redis-py's options for a queue: no retries of its own, no socket timeout (a WAIT or
    a blocking CLAIM holds the connection), unless the caller says otherwise."""
    return {"retry": retry, "socket_timeout": None, "socket_keepalive": True, **options}


def _with_look(batch: list[Command], step: Step, routes: Routes) -> list[Command]:
    """The commands one round trip sends: the batch, and the routes' look when it is due."""
    return [*batch, *routes.look] if step.look else batch


def _sent(routes: Routes, step: Step, batch: list[Command], replies: list[Any]) -> list[Any]:
    """The batch's own replies; the routes hear of the round trip (the look's replies, a
    "not now" that says the owner may have moved)."""
    if step.look:
        routes.looked(step.url, replies[len(batch):], time.monotonic())
        replies = replies[:len(batch)]
    routes.answered(step.url)
    if any(isinstance(reply, NOT_NOW) for reply in replies):
        routes.refused(time.monotonic())
    return replies


def _lost(routes: Routes, url: str, error: BaseException) -> None:
    """A round trip to `url` raised `error`: unless no retry fixes it, the front is
    passed over for a while (routes.py)."""
    if not is_permanent(error):
        routes.failed(url, time.monotonic())


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
            "promote", "ping", "claim", "complete", "fail", "requeue", "extend", "progress", "log",
            "cancel", "metrics", "order_worker", "beat")


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
    remove, cancel, pause, resume, dead, get_config, set_config, queues, lanes,
    set_lane_limit, promote, metrics, order_worker, ping, and for consumers claim,
    complete, fail, requeue, extend, progress, log, beat (the Worker uses those);
    `events()` iterates over the queue's events. `name` may be
    bytes. A blocking claim (or wait) holds one pooled connection while it waits; the
    others go on over the rest of the pool.
    """

    def __init__(self, name: str | bytes, url: str | Sequence[str] | None = None, *,
                 reconnect_s: float = RECONNECT_S, **redis_options: Any) -> None:
        self.commands = QueueCommands(name)
        self.name = self.commands.name
        urls = given(url)
        self.url = joined(urls)
        self.reconnect_s = reconnect_s
        self.routes = Routes(urls, self.commands.key)
        self._options = _redis_options(redis_options, AsyncRetry(NoBackoff(), 0))
        self.clients: dict[str, redis.asyncio.Redis] = {}
        self.client = self.client_for(urls[0])
        self.outage = Outage(log, repr(self), self._close_idle_connections)
        self._closing: asyncio.Future[Any] | None = None
        self._routing: asyncio.Lock | None = None  # made in the loop that first probes

    def client_for(self, url: str) -> redis.asyncio.Redis:
        """The redis-py client of the front at `url` (made when first asked for)."""
        client = self.clients.get(url)
        if client is None:
            client = self.clients[url] = redis.asyncio.Redis.from_url(url, **self._options)
        return client

    def _close_idle_connections(self) -> None:
        """The outage's `on_lost` (reconnect.Outage): idle connections are closed."""
        self._closing = asyncio.ensure_future(asyncio.gather(*(
            client.connection_pool.disconnect(inuse_connections=False)
            for client in self.clients.values())))

    async def execute(self, operation: Operation[Any]) -> Any:
        try:
            batch = next(operation)
            while True:
                try:
                    replies = await self._send(batch)
                except TRANSPORT_ERRORS as error:
                    batch = operation.throw(error)
                else:
                    batch = operation.send(replies)
        except StopIteration as done:
            return done.value

    async def _send(self, batch: list[Command]) -> list[Any]:
        """One round trip; a `Retried` batch again over a lost connection, patiently."""
        patience = Patience(self.reconnect_s, self.outage)
        while True:
            try:
                replies = await self._round_trip(batch)
                if isinstance(batch, Retried):
                    _raise_not_now(replies)
            except (*TRANSPORT_ERRORS, *NOT_NOW) as error:
                if not isinstance(batch, Retried):  # only a Retried batch is sent again
                    raise
                delay = patience.retry_in(error)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                batch = batch.again()
            else:
                self.outage.answered()
                return replies

    async def _round_trip(self, batch: list[Command]) -> list[Any]:
        step = await self.route()
        client = self.client_for(step.url)
        commands = _with_look(batch, step, self.routes)
        try:
            if len(commands) == 1:
                try:
                    replies = [await client.execute_command(*commands[0])]
                except ResponseError as error:
                    replies = [error]
            else:
                replies = await self._pipeline(client, commands)
        except TRANSPORT_ERRORS as error:
            _lost(self.routes, step.url, error)
            raise
        return _sent(self.routes, step, batch, replies)

    @staticmethod
    async def _pipeline(client: redis.asyncio.Redis, commands: list[Command]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return await pipe.execute(raise_on_error=False)

    async def route(self) -> Step:
        """Where the next request goes, the fronts it needs probed first (routes.py);
        one probing at a time (the others then find the fronts probed)."""
        step = self.routes.step(time.monotonic())
        if not step.probe:
            return step
        if self._routing is None:
            self._routing = asyncio.Lock()
        async with self._routing:
            routing = self.routes.route(time.monotonic())
            try:
                url = next(routing)
                while True:
                    said: list[Any] | BaseException
                    try:
                        said = await self._pipeline(self.client_for(url), self.routes.look)
                    except TRANSPORT_ERRORS as error:
                        said = error
                    url = routing.send(said)
            except StopIteration as done:
                probed: Step = done.value
                return probed

    async def look(self) -> None:
        """Ask the fronts again where the queue's requests go, when a look is due (the
        Worker's, whose own requests do not go through this queue's clients)."""
        step = await self.route()
        if step.look:
            try:
                replies = await self._pipeline(self.client_for(step.url), self.routes.look)
            except TRANSPORT_ERRORS as error:
                self.routes.unreached(step.url, error, time.monotonic())
            else:
                self.routes.looked(step.url, replies, time.monotonic())

    async def events(self) -> AsyncIterator[QueueEvent]:
        """The queue's events as they happen (`emq:{name}:events`, protocol section 16),
        parsed, for ever: `async for event in queue.events(): ...`.

        It subscribes on a connection of its own, at the front the queue's requests go
        to (its owner publishes them: routes.py), and, when that connection is lost,
        tries again (backing off 50 ms doubling to 2 s; a WARNING on `emqd.client` when
        the connection is lost and one when it is back): redis-py's PubSub reconnects
        and subscribes again on the next read, so one PubSub serves each front and is
        never subscribed twice. While no event comes for a second, it asks the fronts
        whether the queue moved (a look, when one is due), and subscribes where it went.
        Pub/Sub keeps nothing: what was published while it was away (or moving) is not
        delivered. Leave the loop (`break`) or cancel the task to stop; the connection
        is closed.
        """
        backoff = Backoff()
        url, pubsub = "", None
        try:
            while True:
                step = await self.route()
                if pubsub is None or step.url != url:  # the first time, or it moved
                    if pubsub is not None:
                        await pubsub.aclose()
                    url = step.url
                    pubsub = self.client_for(url).pubsub(ignore_subscribe_messages=True)
                try:
                    if not pubsub.subscribed:  # the first time, or a first attempt failed
                        await pubsub.subscribe(self.commands.events_channel)
                    message = await pubsub.get_message(timeout=EVENTS_QUIET_S)
                except TRANSPORT_ERRORS as error:
                    _lost(self.routes, url, error)
                    delay = backoff.next()
                    self.outage.failed("events", error, delay)
                    await asyncio.sleep(delay)
                    continue
                backoff.reset()
                self.outage.answered()
                if message is None:
                    await self.look()
                elif message["type"] == "message":
                    yield QueueEvent.parse(message["data"])
        finally:
            if pubsub is not None:
                await pubsub.aclose()

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

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

    def __init__(self, name: str | bytes, url: str | Sequence[str] | None = None, *,
                 reconnect_s: float = RECONNECT_S, **redis_options: Any) -> None:
        self.commands = QueueCommands(name)
        self.name = self.commands.name
        urls = given(url)
        self.url = joined(urls)
        self.reconnect_s = reconnect_s
        self.routes = Routes(urls, self.commands.key)
        self._options = _redis_options(redis_options, SyncRetry(NoBackoff(), 0))
        self.clients: dict[str, redis.Redis] = {}
        self.client = self.client_for(urls[0])
        self.outage = Outage(log, repr(self), self._close_idle_connections)

    def client_for(self, url: str) -> redis.Redis:
        """`Queue.client_for`, blocking."""
        client = self.clients.get(url)
        if client is None:
            client = self.clients[url] = redis.Redis.from_url(url, **self._options)
        return client

    def _close_idle_connections(self) -> None:
        for client in self.clients.values():
            client.connection_pool.disconnect(inuse_connections=False)

    def execute(self, operation: Operation[Any]) -> Any:
        try:
            batch = next(operation)
            while True:
                try:
                    replies = self._send(batch)
                except TRANSPORT_ERRORS as error:
                    batch = operation.throw(error)
                else:
                    batch = operation.send(replies)
        except StopIteration as done:
            return done.value

    def _send(self, batch: list[Command]) -> list[Any]:
        """`Queue._send`, blocking."""
        patience = Patience(self.reconnect_s, self.outage)
        while True:
            try:
                replies = self._round_trip(batch)
                if isinstance(batch, Retried):
                    _raise_not_now(replies)
            except (*TRANSPORT_ERRORS, *NOT_NOW) as error:
                if not isinstance(batch, Retried):  # only a Retried batch is sent again
                    raise
                delay = patience.retry_in(error)
                if delay is None:
                    raise
                time.sleep(delay)
                batch = batch.again()
            else:
                self.outage.answered()
                return replies

    def _round_trip(self, batch: list[Command]) -> list[Any]:
        """`Queue._round_trip`, blocking."""
        step = self._route()
        client = self.client_for(step.url)
        commands = _with_look(batch, step, self.routes)
        try:
            if len(commands) == 1:
                try:
                    replies = [client.execute_command(*commands[0])]
                except ResponseError as error:
                    replies = [error]
            else:
                replies = self._pipeline(client, commands)
        except TRANSPORT_ERRORS as error:
            _lost(self.routes, step.url, error)
            raise
        return _sent(self.routes, step, batch, replies)

    @staticmethod
    def _pipeline(client: redis.Redis, commands: list[Command]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    def _route(self) -> Step:
        """`Queue.route`, blocking."""
        routing = self.routes.route(time.monotonic())
        try:
            url = next(routing)
            while True:
                said: list[Any] | BaseException
                try:
                    said = self._pipeline(self.client_for(url), self.routes.look)
                except TRANSPORT_ERRORS as error:
                    said = error
                url = routing.send(said)
        except StopIteration as done:
            step: Step = done.value
            return step

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncQueue({self.name!r}, url={redacted(self.url)!r})"
