"""Shared fixtures: one emqd per session (flushed per test), and the reference Redis.

Tests that compare with a real redis-server use the `redis_ref` fixture. When
redis-server is not installed they are skipped with a loud reason, except when
EMQD_REQUIRE_REDIS=1 (as .ci/run sets it), where its absence is a failure.
The dashboard's browser tests do the same with Chromium and
EMQD_REQUIRE_BROWSER=1 (tests/http/browser.py); both warnings are repeated at
the end of the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
import redis

from tests.http.browser import BROWSER_MISSING
from tests.support import (
    RawClient,
    ServerProcess,
    redis_server_path,
    scratch_made,
    start_emqd,
    start_redis,
)

# The long cluster suite (tests/partition/: the partition scenarios, which need root,
# network namespaces and iptables, and the scale ones; and the chaos and failover runs
# of tests/cluster/, a minute and a half of killed nodes and fronts) runs for many
# minutes: its own command runs it (scripts/test-partitions, which sets
# EMQD_PARTITIONS=1), not the everyday suite, which keeps the judge's own tests and
# every other cluster test, so that it stays a few minutes long.
LONG_CLUSTER_SUITE = ["partition/test_partitions.py", "partition/test_scale.py",
                      "cluster/test_chaos.py", "cluster/test_failover.py"]
collect_ignore = [] if os.environ.get("EMQD_PARTITIONS") == "1" else LONG_CLUSTER_SUITE

REDIS_MISSING = (
    "REDIS-SERVER NOT INSTALLED: the differential tests against real Redis were SKIPPED. "
    "Install Debian's redis-server (apt-get install -y redis-server) to run them."
)


@pytest.fixture(scope="session")
def emqd_server() -> Iterator[ServerProcess]:
    server = start_emqd()
    yield server
    server.stop()


@pytest.fixture
def emqd_port(emqd_server: ServerProcess) -> int:
    """The shared server's port, with its keyspace flushed before the test."""
    with redis.Redis(port=emqd_server.port) as client:
        client.flushall()
    return emqd_server.port


@pytest.fixture
def r(emqd_port: int) -> Iterator[redis.Redis]:
    """A redis-py client on a flushed emqd."""
    client = redis.Redis(port=emqd_port)
    yield client
    client.close()


@pytest.fixture
def raw(emqd_port: int) -> Iterator[RawClient]:
    client = RawClient(emqd_port)
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_reference() -> Iterator[ServerProcess]:
    if redis_server_path() is None:
        if os.environ.get("EMQD_REQUIRE_REDIS") == "1":
            pytest.fail("EMQD_REQUIRE_REDIS=1 but redis-server is not installed")
        pytest.skip(REDIS_MISSING)
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def redis_ref(redis_reference: ServerProcess) -> int:
    """The reference redis-server's port, flushed before the test."""
    with redis.Redis(port=redis_reference.port) as client:
        client.flushall()
    return redis_reference.port


PASSWORD = "sekret"


@pytest.fixture(scope="module")
def emqd_auth() -> Iterator[int]:
    """An emqd started with `--requirepass sekret` (its port)."""
    server = start_emqd("--requirepass", PASSWORD)
    yield server.port
    server.stop()


@pytest.fixture(scope="module")
def redis_auth(redis_reference: ServerProcess) -> Iterator[int]:
    """The reference Redis with `--requirepass sekret` (its port)."""
    server = start_redis("--requirepass", PASSWORD)
    yield server.port
    server.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak-seconds", type=float, default=None,
        help="how long tests/test_soak.py sends refusals (default 3, or $EMQD_SOAK_SECONDS); "
             "it stops early at --soak-refusals")
    parser.addoption(
        "--soak-refusals", type=int, default=None,
        help="how many refusals tests/test_soak.py sends at most (default 1,000,000, or "
             "$EMQD_SOAK_REFUSALS)")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    made = scratch_made()
    if made is not None and exitstatus == 0:
        shutil.rmtree(made, ignore_errors=True)
    elif made is not None:
        terminalreporter.write_line(f"the logs of the processes the tests started: {made}")
    skipped = terminalreporter.stats.get("skipped", [])
    for missing in (REDIS_MISSING, BROWSER_MISSING):
        if any(missing in str(getattr(rep, "longrepr", "")) for rep in skipped):
            terminalreporter.write_sep("!", missing, red=True, bold=True)
