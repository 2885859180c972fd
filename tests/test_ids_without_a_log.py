"""Without a log, fencing survives a restart (issue 12, finding 9): no (id, token) handed
out by one process names a job of the next, so a stale worker's COMPLETE is refused."""

from __future__ import annotations

import redis

from tests.support import start_emqd


def _first_job(server_port: int) -> tuple[bytes, bytes]:
    with redis.Redis(port=server_port) as r:
        r.execute_command("EMQ.ADD", "q", "p")
        job_id, token, _, _ = r.execute_command("EMQ.CLAIM", "q", 60_000)
        return job_id, token


def test_a_stale_worker_cannot_complete_the_next_process_s_job() -> None:
    first = start_emqd("--appendonly", "no", "--stalled-interval", "0", ids_from_one=False)
    try:
        stale = _first_job(first.port)
    finally:
        first.stop()
    second = start_emqd("--appendonly", "no", "--stalled-interval", "0", ids_from_one=False)
    try:
        fresh = _first_job(second.port)
        assert int(fresh[0]) > int(stale[0]) > 1  # both started after their process's base
        with redis.Redis(port=second.port) as r:
            try:
                r.execute_command("EMQ.COMPLETE", "q", *stale)
            except redis.ResponseError as error:
                assert str(error).startswith("EMQSTALE")
            else:
                raise AssertionError("a worker of the earlier process completed a new job")
            assert r.execute_command("EMQ.GET", "q", fresh[0])[b"state"] == b"active"
    finally:
        second.stop()


def test_with_a_log_ids_go_on_from_one(tmp_path: object) -> None:
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path), ids_from_one=False)
    try:
        with redis.Redis(port=server.port) as r:
            assert r.execute_command("EMQ.ADD", "q", "p") == b"1"
    finally:
        server.stop()
