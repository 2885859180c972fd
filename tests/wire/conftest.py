"""Servers with a password: emqd and the reference Redis, both `--requirepass sekret`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import start_emqd, start_redis

PASSWORD = "sekret"


@pytest.fixture(scope="module")
def emqd_auth() -> Iterator[int]:
    server = start_emqd("--requirepass", PASSWORD)
    yield server.port
    server.stop()


@pytest.fixture(scope="module")
def redis_auth(redis_reference: object) -> Iterator[int]:
    server = start_redis("--requirepass", PASSWORD)
    yield server.port
    server.stop()
