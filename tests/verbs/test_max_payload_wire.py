"""`--max-payload` bounds every job value a client sends, over the wire: ADD's payload,
COMPLETE's RESULT and FAIL's ERROR. A refusal writes nothing (the log does not grow, the
job stays held) and keeps the connection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support import ServerProcess, start_emqd

LIMIT = 1000


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    path = tmp_path_factory.mktemp("bounded")
    server = start_emqd("--appendonly", "yes", "--appendfsync", "always", "--max-payload",
                        str(LIMIT), "--stalled-interval", "0", dir=str(path))
    yield server, path / "emqd.aof"
    server.stop()


@pytest.mark.parametrize("verb, keyword, error", [
    ("EMQ.COMPLETE", "RESULT", "ERR RESULT exceeds max-payload"),
    ("EMQ.FAIL", "ERROR", "ERR ERROR exceeds max-payload"),
])
def test_a_value_over_max_payload_is_refused_and_writes_nothing(
    bounded: tuple[ServerProcess, Path], verb: str, keyword: str, error: str
) -> None:
    server, log = bounded
    with redis.Redis(port=server.port) as r:
        job_id = r.execute_command("EMQ.ADD", "q", "p")
        job = r.execute_command("EMQ.CLAIM", "q", 60000)
        assert job[0] == job_id
        before = (log.stat().st_size, r.hgetall(f"emq:{{q}}:job:{job_id.decode()}"))
        with pytest.raises(redis.ResponseError, match=f"^{error[4:]}$"):
            r.execute_command(verb, "q", job_id, job[1], keyword, b"x" * (LIMIT + 1))
        assert (log.stat().st_size, r.hgetall(f"emq:{{q}}:job:{job_id.decode()}")) == before
        assert r.ping()  # the connection is kept
        r.execute_command(verb, "q", job_id, job[1], keyword, b"x" * LIMIT)  # at the bound: taken
        row = r.hgetall(f"emq:{{q}}:job:{job_id.decode()}")
        assert row[b"result" if keyword == "RESULT" else b"last_error"] == b"x" * LIMIT
