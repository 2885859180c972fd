"""The cluster the cluster tests share: 3 primaries, a replica each, started once a module.

Tests that kill a node or a front use a cluster of their own (`Cluster.start`
in the test). Without redis-server the tests are skipped, loudly, except under
EMQD_REQUIRE_REDIS=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.cluster.support import Cluster
from tests.conftest import REDIS_MISSING
from tests.support import redis_server_path


def need_redis() -> None:
    if redis_server_path() is None:
        if os.environ.get("EMQD_REQUIRE_REDIS") == "1":
            pytest.fail("EMQD_REQUIRE_REDIS=1 but redis-server is not installed")
        pytest.skip(REDIS_MISSING)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    need_redis()
    started = Cluster.start()
    yield started
    started.stop()
