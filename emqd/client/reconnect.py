"""How long to wait before trying the server again: shared by the Worker (every part of
it) and `Queue.events()`, so that every reconnect in the client backs off alike."""

from __future__ import annotations


class Backoff:
    """Reconnect delays: doubling from `first_s` up to `max_s`, reset on success."""

    def __init__(self, first_s: float = 0.05, max_s: float = 2.0) -> None:
        self.first_s, self.max_s = first_s, max_s
        self.current = 0.0

    def next(self) -> float:
        self.current = min(self.max_s, self.current * 2 if self.current else self.first_s)
        return self.current

    def reset(self) -> None:
        self.current = 0.0
