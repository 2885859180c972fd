"""The job cycle in one process, without sockets: CPU per ADD, CLAIM and COMPLETE.

    python3 -m emqd.bench.cycle_inproc [--jobs 20000] [--repeat 3] [--zset-max-listpack-entries N]

Feeds pipelines of 50 requests straight into `Connection.data_received` (a
fake transport keeps the replies) on a server with no log, as emqd-bench's
cycle does over sockets, and prints the CPU time (process_time) per cycle and
per verb, best of `--repeat`. It measures what each command costs the server
(parsing, dispatch, planning, applying, encoding), not the network, so it
moves much less with other load on the machine than emqd-bench does; use it
to compare two versions of the code, and emqd-bench for the figures that count.
`--zset-max-listpack-entries 0` holds every sorted set as a skiplist, which
shows what the compact form of small sets costs (the cycle's `pending` and
`active` stay below 128 members here).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import hiredis
import uvloop

from emqd.config import Config
from emqd.serve.lifecycle import Server
from emqd.wire.protocol import Connection

PAYLOAD = b"p" * 100
BATCH = 50


class _Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...


def _request(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


async def _cycle(jobs: int, listpack_entries: int) -> tuple[float, float, float]:
    server = Server(Config(appendonly=False, http_port=0,
                           zset_max_listpack_entries=listpack_entries))
    server.housekeeping.start(asyncio.get_running_loop())
    conn = Connection(server.hub)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    adds = _request(b"EMQ.ADD", b"bench", PAYLOAD) * BATCH
    claims = _request(b"EMQ.CLAIM", b"bench", b"30000") * BATCH
    reader = hiredis.Reader()
    spent = [0.0, 0.0, 0.0]
    for _ in range(jobs // BATCH):
        started = time.process_time()
        conn.data_received(adds)
        added = time.process_time()
        transport.out.clear()
        conn.data_received(claims)
        claimed = time.process_time()
        reader.feed(b"".join(transport.out))
        transport.out.clear()
        completes = []
        while (reply := reader.gets()) is not False:
            completes.append(_request(b"EMQ.COMPLETE", b"bench", reply[0], reply[1]))
        data = b"".join(completes)
        before = time.process_time()
        conn.data_received(data)
        done = time.process_time()
        transport.out.clear()
        spent[0] += added - started
        spent[1] += claimed - added
        spent[2] += done - before
    server.housekeeping.stop()
    return spent[0] / jobs * 1e6, spent[1] / jobs * 1e6, spent[2] / jobs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--zset-max-listpack-entries", type=int,
                        default=Config().zset_max_listpack_entries)
    options = parser.parse_args()
    runs = [uvloop.run(_cycle(options.jobs, options.zset_max_listpack_entries))
            for _ in range(options.repeat)]
    add, claim, complete = min(runs, key=sum)
    print(f"cycle {add + claim + complete:.1f} us of CPU: ADD {add:.1f}, CLAIM {claim:.1f}, "
          f"COMPLETE {complete:.1f} (best of {options.repeat}, {options.jobs} jobs)")


if __name__ == "__main__":
    main()
