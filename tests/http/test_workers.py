"""emqd/http/workers.py `joined`: every front's roster, one row a worker name.

Each case is this front's roster and the other fronts' as the Workers page gets them:
made by `exported` on that front and carried as JSON (the relay's
`from_every_front`), or None for a front that did not answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from emqd.http.workers import Exported, Held, Roster, Worker, exported, joined
from emqd.sessions import worker_name

ALPHA = worker_name.build("alpha", 11, ["q"], 4, 1_000)
BETA = worker_name.build("beta", 22, ["q", "r"], 1, 2_000)
OTHER = "redis-cli"  # a connection named, but not in the worker form


def worker(name: str, connections: int = 1, addresses: tuple[str, ...] = ("10.0.0.1",),
           oldest_ms: int | None = 500, held: tuple[Held, ...] = (),
           order: str = "run") -> Worker:
    raw = name.encode("utf-8")
    return Worker(name, worker_name.parse(name), raw, set(addresses), connections, oldest_ms,
                  list(held), order)


def job(queue: bytes, job_id: bytes, claimed_ms: int | None = 100) -> Held:
    return Held(queue, job_id, claimed_ms)


def roster(*workers: Worker, unheld: tuple[Held, ...] = (), read: int = 0,
           cut: bool = False) -> Roster:
    return Roster(list(workers), list(unheld), read, cut)


def carried(found: Roster) -> Exported:
    """A front's roster as another front reads it: exported, through JSON."""
    loaded: Exported = json.loads(json.dumps(exported(found)))
    return loaded


def shown(found: Roster) -> Any:
    """What the page shows of a roster, comparable."""
    return ([(w.name, w.known is not None, w.raw, sorted(w.addresses), w.connections,
              w.oldest_ms, w.held, w.order) for w in found.workers],
            found.unheld, found.read, found.cut, found.fronts)


Case = tuple[Callable[[], Roster], Callable[[], dict[str, Exported | None]], Any]

CASES: dict[str, Case] = {
    "no other front: the roster as it is": (
        lambda: roster(worker(ALPHA, held=(job(b"q", b"1"),)), unheld=(job(b"q", b"2"),),
                       read=2),
        lambda: {},
        ([(ALPHA, True, ALPHA.encode(), ["10.0.0.1"], 1, 500, [job(b"q", b"1")], "run")],
         [job(b"q", b"2")], 2, False, [])),
    "one worker on two fronts: one row, all its fronts' figures; a cut roster stays cut": (
        lambda: roster(worker(ALPHA, 2, ("10.0.0.1",), 700, (job(b"q", b"1"),), "quiet"),
                       read=1, cut=True),
        lambda: {"front-b:7000": carried(roster(
            worker(ALPHA, 3, ("10.0.0.9", "10.0.0.1"), 300, (job(b"r", b"5", None),), "run"),
            read=4))},
        ([(ALPHA, True, ALPHA.encode(), ["10.0.0.1", "10.0.0.9"], 5, 300,
           [job(b"q", b"1"), job(b"r", b"5", None)], "quiet")], [], 5, True, [])),
    "the strongest order of any front": (
        lambda: roster(worker(ALPHA, order="quiet")),
        lambda: {"front-b:7000": carried(roster(worker(ALPHA, order="stop"))),
                 "front-c:7000": carried(roster(worker(ALPHA, order="run")))},
        ([(ALPHA, True, ALPHA.encode(), ["10.0.0.1"], 3, 500, [], "stop")], [], 0, False,
         [])),
    "a worker only another front has: a row of its own, in name order": (
        lambda: roster(worker(BETA, oldest_ms=None)),
        lambda: {"front-b:7000": carried(roster(worker(ALPHA, 0, (), None,
                                                       (job(b"q", b"3"),))))},
        ([(ALPHA, True, ALPHA.encode(), [], 0, None, [job(b"q", b"3")], "run"),
          (BETA, True, BETA.encode(), ["10.0.0.1"], 1, None, [], "run")], [], 0, False, [])),
    "a front that does not answer is named, the others joined": (
        lambda: roster(worker(ALPHA), read=1, unheld=(job(b"q", b"8"),)),
        lambda: {"front-c:7000": None, "front-a:7000": None,
                 "front-b:7000": carried(roster(unheld=(job(b"r", b"9", None),), read=3,
                                                cut=True))},
        ([(ALPHA, True, ALPHA.encode(), ["10.0.0.1"], 1, 500, [], "run")],
         [job(b"q", b"8"), job(b"r", b"9", None)], 4, True, ["front-a:7000", "front-c:7000"])),
    "another front's named connection: shown only while it holds jobs, after the workers": (
        lambda: roster(worker(ALPHA)),
        lambda: {"front-b:7000": carried(roster(worker(OTHER, held=(job(b"q", b"4"),)))),
                 "front-c:7000": carried(roster(worker("idle-client")))},
        ([(ALPHA, True, ALPHA.encode(), ["10.0.0.1"], 1, 500, [], "run"),
          (OTHER, False, OTHER.encode(), ["10.0.0.1"], 1, 500, [job(b"q", b"4")], "run")],
         [], 0, False, [])),
    "a name and ids not UTF-8 come back as the bytes they were": (
        lambda: roster(),
        lambda: {"front-b:7000": carried(roster(Worker(
            "caf\\xe9", None, b"caf\xe9", {"10.0.0.2"}, 1, 9, [job(b"q\xff", b"\xfe1")])))},
        ([("caf\\xe9", False, b"caf\xe9", ["10.0.0.2"], 1, 9, [job(b"q\xff", b"\xfe1")],
           "run")], [], 0, False, [])),
}


@pytest.mark.parametrize("case", CASES)
def test_every_front_s_roster_is_joined_by_worker_name(case: str) -> None:
    here, others, expected = CASES[case]
    assert shown(joined(here(), others())) == expected
