"""A server without the stall sweep, for wire tests that run EMQ.STALLED.CHECK by hand
(the server's own sweep would otherwise recover the expired leases first)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support import ServerProcess, start_emqd


@pytest.fixture(scope="session")
def no_sweep_server() -> Iterator[ServerProcess]:
    server = start_emqd("--stalled-interval", "0")
    yield server
    server.stop()


@pytest.fixture
def rq(no_sweep_server: ServerProcess) -> Iterator[redis.Redis]:
    """A redis-py client on a flushed emqd whose stall sweep is off."""
    client = redis.Redis(port=no_sweep_server.port)
    client.flushall()
    yield client
    client.close()
