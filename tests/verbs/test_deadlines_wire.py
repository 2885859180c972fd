"""A time whose deadline a score cannot hold exactly is refused, over the wire.

Scores are doubles: beyond 2^53 ms (the year 285,000) they stop holding every
integer, so a deadline there would be answered as one number and stored as
another (`EMQ.EXTEND ... 9000000000000000000` answered 9000001796277074761 and
stored 9.000001796277075e18). Every verb that takes a time refuses a deadline
beyond 2^53 ms as it refuses any other out-of-range time, writes nothing and
keeps the connection; a deadline just under it is answered and stored alike.
"""

from __future__ import annotations

import time

import pytest
import redis

EXACT = 2**53
FAR = 9_000_000_000_000_000_000  # within 64 bits, far beyond 2^53


def claimed(r: redis.Redis) -> tuple[bytes, bytes]:
    r.execute_command("EMQ.ADD", "q", "p", "ID", "j")
    job = r.execute_command("EMQ.CLAIM", "q", 60000)
    return job[0], job[1]


def dump(r: redis.Redis) -> dict[bytes, object]:
    return {key: (r.hgetall(key) if r.type(key) == b"hash"
                  else r.zrange(key, 0, -1, withscores=True))
            for key in r.keys("*")}


@pytest.mark.parametrize("argv, error", [
    (["EMQ.EXTEND", "q", "j", "{token}", FAR], "invalid LEASE_MS in 'emq.extend' command"),
    (["EMQ.EXTEND", "q", "j", "{token}", EXACT], "invalid LEASE_MS in 'emq.extend' command"),
    (["EMQ.CLAIM", "q", FAR], "invalid LEASE_MS in 'emq.claim' command"),
    (["EMQ.CLAIM", "q", 1000, "BLOCK", FAR], "timeout is out of range"),
    (["EMQ.ADD", "q", "p", "DELAY", FAR], "invalid DELAY in 'emq.add' command"),
    (["EMQ.ADD", "q", "p", "AT", EXACT + 1], "invalid AT in 'emq.add' command"),
    (["EMQ.ADD", "q", "p", "UNIQUE", "k", "TTL", FAR], "invalid TTL in 'emq.add' command"),
    (["EMQ.FAIL", "q", "j", "{token}", "BACKOFF", FAR], "invalid BACKOFF in 'emq.fail' command"),
    (["EMQ.WAIT", "q", "j", FAR], "timeout is out of range"),
    (["EMQ.RATE", "q", 5, FAR], "invalid PER_MS in 'emq.rate' command"),
    (["EMQ.LANE.RATE", "q", "g", 5, FAR], "invalid PER_MS in 'emq.lane.rate' command"),
])
def test_a_deadline_beyond_2_53_ms_is_refused_and_writes_nothing(
    rq: redis.Redis, argv: list, error: str
) -> None:
    job_id, token = claimed(rq)
    before = dump(rq)
    argv = [token if arg == "{token}" else arg for arg in argv]
    with pytest.raises(redis.ResponseError, match=f"^{error}$"):
        rq.execute_command(*argv)
    assert dump(rq) == before
    assert rq.ping()


def test_extend_just_under_2_53_answers_the_deadline_it_stores(rq: redis.Redis) -> None:
    job_id, token = claimed(rq)
    lease = EXACT - int(time.time() * 1000) - 3_600_000  # an hour of slack for the clock
    deadline = rq.execute_command("EMQ.EXTEND", "q", job_id, token, lease)
    assert deadline <= EXACT
    assert rq.zscore("emq:{q}:active", job_id) == deadline
    assert int(rq.zscore("emq:{q}:active", job_id)) == deadline  # the very integer answered
