"""The lanes' claim cycle in one process, without sockets: CPU per CLAIM + COMPLETE.

    python3 -m emqd.bench.lanes_inproc [--jobs 40000] [--lanes 10000] [--lane-limit 1] [--repeat 3]

What emqd/bench/lanes.py times over sockets, fed straight into
`Connection.data_received` (a fake transport keeps the replies) on a server
with no log: `jobs` jobs added untimed, flat or job i in group `g<i % lanes>`,
then pipelines of 50 CLAIMs, each batch of claims completed (a pipeline of 50
COMPLETEs) once four more are out, as emqd/bench/lanes.py's four connections hold
about 200 jobs at a time, until every job is claimed and completed. Prints
the CPU time (process_time) per CLAIM and per COMPLETE for the flat queue and
the lanes, best of `--repeat`, and their ratio: the planners' and the store's
share of the lanes target (emqd/bench/lanes.py), without the loop and the network.
Use it to compare two versions of the code; emqd/bench/lanes.py gives the figure that counts.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import hiredis
import uvloop

from emqd.bench.cycle_inproc import _request, _Transport
from emqd.config import Config
from emqd.serve.lifecycle import Server
from emqd.wire.protocol import Connection

PAYLOAD = b"p" * 100
BATCH = 50
IN_FLIGHT = 4  # batches claimed and not yet completed, as emqd/bench/lanes.py's 4 connections hold
FILL = 1000


async def _run(jobs: int, lanes: int | None, lane_limit: int) -> tuple[float, float]:
    """us of CPU per CLAIM and per COMPLETE."""
    server = Server(Config(appendonly=False, http_port=0))
    server.housekeeping.start(asyncio.get_running_loop())
    conn = Connection(server.hub)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(_request(b"EMQ.CONFIG", b"bench", b"SET", b"lane_limit",
                                b"%d" % lane_limit))
    for start in range(0, jobs, FILL):
        batch = range(start, min(start + FILL, jobs))
        if lanes is None:
            conn.data_received(_request(b"EMQ.ADD", b"bench", PAYLOAD) * len(batch))
        else:
            conn.data_received(b"".join(
                _request(b"EMQ.ADD", b"bench", PAYLOAD, b"GROUP", b"g%d" % (i % lanes))
                for i in batch))
        transport.out.clear()
    claims = _request(b"EMQ.CLAIM", b"bench", b"60000") * BATCH
    reader = hiredis.Reader()
    spent = [0.0, 0.0]
    held: list[bytes] = []  # each batch's COMPLETEs, IN_FLIGHT batches held at a time
    for round_ in range(jobs // BATCH + IN_FLIGHT):
        if round_ < jobs // BATCH:
            started = time.process_time()
            conn.data_received(claims)
            spent[0] += time.process_time() - started
            reader.feed(b"".join(transport.out))
            transport.out.clear()
            completes = []
            while (reply := reader.gets()) is not False:
                if not isinstance(reply, list):
                    raise SystemExit(f"CLAIM answered {reply!r} with jobs left")
                completes.append(_request(b"EMQ.COMPLETE", b"bench", reply[0], reply[1]))
            held.append(b"".join(completes))
        if held and (len(held) == IN_FLIGHT or round_ >= jobs // BATCH):
            started = time.process_time()
            conn.data_received(held.pop(0))
            spent[1] += time.process_time() - started
            answered = b"".join(transport.out)
            if answered != b"+OK\r\n" * BATCH:
                raise SystemExit(f"COMPLETE answered {answered[:200]!r}")
            transport.out.clear()
    server.housekeeping.stop()
    return spent[0] / jobs * 1e6, spent[1] / jobs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--lanes", type=int, default=10_000)
    parser.add_argument("--lane-limit", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    if options.jobs > 1_000_000 or options.repeat > 50:
        parser.error("bounded: at most 1,000,000 jobs and 50 repeats")
    results = {}
    for case, lanes in (("flat", None), ("lanes", options.lanes)):
        runs = [uvloop.run(_run(options.jobs, lanes, options.lane_limit))
                for _ in range(options.repeat)]
        results[case] = min(runs, key=sum)
    for case, (claim, complete) in results.items():
        print(f"{case:5} CLAIM + COMPLETE {claim + complete:5.1f} us of CPU: "
              f"CLAIM {claim:.1f}, COMPLETE {complete:.1f}")
    ratio = sum(results["flat"]) / sum(results["lanes"])
    print(f"lanes / flat (claims per CPU second) {ratio:.2f}; best of {options.repeat}, "
          f"{options.jobs:,} jobs, {options.lanes:,} lanes, lane_limit {options.lane_limit}")


if __name__ == "__main__":
    main()
