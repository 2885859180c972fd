"""Parked clients, first come first served, by the keys they wait on.

A blocking command that finds nothing parks its client on some keys; the
keyspace notes writes to watched keys; after each batch of work the server
asks `ready_waiters()` and re-runs each waiter's request in the order they
parked. This module is bookkeeping only: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from emqd.store.keyspace import Keyspace

W = TypeVar("W", bound=Hashable)  # a parked client (wire/protocol.py: its Connection)


class Waiters(Generic[W]):
    def __init__(self, keyspace: Keyspace) -> None:
        self.keyspace = keyspace
        self.by_key: dict[bytes, dict[W, None]] = {}  # insertion-ordered: FIFO
        self.keys_of: dict[W, tuple[bytes, ...]] = {}

    def __len__(self) -> int:
        return len(self.keys_of)

    def park(self, waiter: W, keys: tuple[bytes, ...]) -> None:
        self.keys_of[waiter] = keys
        watched = self.keyspace.watched
        for key in keys:
            self.by_key.setdefault(key, {})[waiter] = None
            watched[key] = watched.get(key, 0) + 1

    def unpark(self, waiter: W) -> None:
        keys = self.keys_of.pop(waiter, ())
        watched = self.keyspace.watched
        for key in keys:
            queue = self.by_key.get(key)
            if queue is not None:
                queue.pop(waiter, None)
                if not queue:
                    del self.by_key[key]
            count = watched.get(key, 0) - 1
            if count > 0:
                watched[key] = count
            else:
                watched.pop(key, None)

    def ready_waiters(self) -> list[W]:
        """Waiters on keys written since the last call, each once, longest-parked first."""
        ready = self.keyspace.take_ready()
        if not ready:
            return []
        candidates: set[W] = set()
        for key in ready:
            candidates.update(self.by_key.get(key, ()))
        return [waiter for waiter in self.keys_of if waiter in candidates]

