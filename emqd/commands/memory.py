"""MEMORY USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP, and INFO's memory section.

Every figure comes from one accounting (docs/SERVER.md, "Memory"): a key's bytes
as the store holds it (store/sizes.py; MEMORY USAGE), their running total
(`Keyspace.used`, the dataset), and the process's resident size when the server
started (the overhead). `used_memory` is their sum, what `maxmemory` bounds. The
syntax, reply shapes and errors are Redis 7.0's; the numbers are emqd's own,
so MEMORY STATS names Redis's fields and fills the allocator's with what a
Python process can tell (its resident size).
"""

from __future__ import annotations

from typing import Any

from emqd import errors
from emqd.command import command, container
from emqd.commands import helps
from emqd.compat.numbers import parse_int
from emqd.core import Core, Session
from emqd.reply import Reply, Verbatim
from emqd.serve.process_memory import human, rss_bytes, total_system_memory
from emqd.store import sizes
from emqd.store.keyspace import key_bytes

DOCTOR_EMPTY = 5 * 1024 * 1024  # dataset bytes under which DOCTOR has nothing to say


def _percent(part: int, whole: int) -> float:
    return part * 100 / whole if whole else 0.0


def _overhead(state: Core) -> tuple[int, int]:
    """(the keyspace's own table, all overhead): what is not the data itself."""
    table = len(state.keyspace) * sizes.KEY
    return table, state.memory_startup + table


def info_fields(state: Core) -> dict[str, object]:
    """INFO memory, in Redis 7.0's order, the fields tools read."""
    used = state.used_memory()
    rss = rss_bytes()
    _, overhead = _overhead(state)
    system = total_system_memory()
    limit = state.config.maxmemory
    return {
        "used_memory": used,
        "used_memory_human": human(used),
        "used_memory_rss": rss,
        "used_memory_rss_human": human(rss),
        "used_memory_peak": state.memory_peak,
        "used_memory_peak_human": human(state.memory_peak),
        "used_memory_peak_perc": f"{_percent(used, state.memory_peak):.2f}%",
        "used_memory_overhead": overhead,
        "used_memory_startup": state.memory_startup,
        "used_memory_dataset": used - overhead,
        "used_memory_dataset_perc":
            f"{_percent(used - overhead, used - state.memory_startup):.2f}%",
        "total_system_memory": system,
        "total_system_memory_human": human(system),
        "maxmemory": limit,
        "maxmemory_human": human(limit),
        "maxmemory_policy": state.config.maxmemory_policy,
        "mem_fragmentation_ratio": f"{rss / used:.2f}" if used else "0.00",
        "mem_fragmentation_bytes": rss - used,
        "mem_not_counted_for_evict": 0,
        "mem_clients_normal": 0,
        "mem_aof_buffer": 0,
        "mem_allocator": "pymalloc",
        "lazyfree_pending_objects": 0,
    }


def memory_usage(session: Session, argv: list[bytes]) -> Reply:
    """MEMORY USAGE key [SAMPLES count]: the key's bytes, nil when it does not exist.

    Every value knows its whole size, so SAMPLES (how many elements Redis looks
    at to estimate a big one) is checked as Redis checks it and changes nothing.
    """
    i = 3
    while i < len(argv):
        if argv[i].lower() != b"samples" or i + 1 >= len(argv):
            raise errors.SYNTAX()
        samples = parse_int(argv[i + 1])
        if samples is None:
            raise errors.NOT_INTEGER()
        if samples < 0:
            raise errors.SYNTAX()
        i += 2
    return key_bytes(session.core.keyspace, argv[2])


def memory_stats(session: Session, argv: list[bytes]) -> Reply:
    """MEMORY STATS: Redis 7.0's fields, in its order (db.0 only while there are keys)."""
    state = session.core
    used = state.used_memory()
    startup = state.memory_startup
    peak = state.memory_peak
    table, overhead = _overhead(state)
    keys = len(state.keyspace)
    rss = rss_bytes()
    net = used - startup
    stats: dict[bytes, Any] = {
        b"peak.allocated": peak,
        b"total.allocated": used,
        b"startup.allocated": startup,
        b"replication.backlog": 0,
        b"clients.slaves": 0,
        b"clients.normal": 0,
        b"cluster.links": 0,
        b"aof.buffer": 0,
        b"lua.caches": 0,
        b"functions.caches": 0,
    }
    if keys:
        stats[b"db.0"] = {b"overhead.hashtable.main": table,
                          b"overhead.hashtable.expires": 0,
                          b"overhead.hashtable.slot-to-keys": 0}
    stats |= {
        b"overhead.total": overhead,
        b"keys.count": keys,
        b"keys.bytes-per-key": net // keys if keys else 0,
        b"dataset.bytes": used - overhead,
        b"dataset.percentage": _percent(used - overhead, net),
        b"peak.percentage": _percent(used, peak),
        b"allocator.allocated": used,
        b"allocator.active": used,
        b"allocator.resident": rss,
        b"allocator-fragmentation.ratio": 1.0,
        b"allocator-fragmentation.bytes": 0,
        b"allocator-rss.ratio": rss / used if used else 0.0,
        b"allocator-rss.bytes": rss - used,
        b"rss-overhead.ratio": 1.0,
        b"rss-overhead.bytes": 0,
        b"fragmentation": rss / used if used else 0.0,
        b"fragmentation.bytes": rss - used,
    }
    return stats


_EMPTY_REPORT = (
    "Hi Sam, this instance is empty or is using very little memory, my issues detector "
    "can't be used in these conditions. Please, leave for your mission on Earth and fill "
    "it with some data. The new Sam and I will be back to our programming as soon as I "
    "finished rebooting.\n")
_NO_ISSUES = ("Hi Sam, I can't find any memory issue in your instance. "
              "I can only account for what occurs on this base.\n")


def doctor_report(state: Core) -> str:
    """MEMORY DOCTOR's text: Redis's for an instance with little data or no issue; what
    emqd can see otherwise (a past peak, the limit near, a resident size far above
    the data)."""
    used = state.used_memory()
    if used - state.memory_startup < DOCTOR_EMPTY:
        return _EMPTY_REPORT
    issues = []
    if state.memory_peak > used * 1.5:
        issues.append(
            f"Peak memory: this instance once used {human(state.memory_peak)}, more than "
            f"150% of the {human(used)} it uses now. Python's allocator keeps some of what "
            "it freed, so the resident size can stay near the peak; it is reused as data "
            "comes back.")
    limit = state.config.maxmemory
    if limit and used > limit * 0.9:
        issues.append(
            f"Maxmemory: {human(used)} used of the {human(limit)} allowed. Past the limit, "
            "commands that add data (EMQ.ADD, HSET, ZADD, ...) are refused with -OOM while "
            "claims, completions and reads go on, so workers can drain the queues.")
    rss = rss_bytes()
    if rss > used * 1.4 and rss - used > 10 * 1024 * 1024:
        issues.append(
            f"Fragmentation: the resident size ({human(rss)}) is {rss / used:.2f} times the "
            "memory accounted for. Memory freed after a peak stays with the process until "
            "it is reused; a restart (the log reloads) gives it back.")
    if not issues:
        return _NO_ISSUES
    return ("Sam, I detected a few issues in this instance's memory:\n\n"
            + "".join(f" * {issue}\n\n" for issue in issues)
            + "docs/SERVER.md (Memory) says what each figure counts.\n")


def memory_doctor(session: Session, argv: list[bytes]) -> Reply:
    return Verbatim(doctor_report(session.core).encode())


def memory_malloc_stats(session: Session, argv: list[bytes]) -> Reply:
    """Redis's answer where its allocator is not jemalloc."""
    return Verbatim(b"Stats not supported for the current allocator")


def memory_purge(session: Session, argv: list[bytes]) -> Reply:
    """OK, as Redis answers where its allocator has nothing to purge: CPython gives back
    an arena of its allocator as soon as the arena is empty."""
    return "OK"


def memory_help(session: Session, argv: list[bytes]) -> Reply:
    return helps.help_reply("MEMORY", helps.MEMORY)


_SRV = "server"
COMMANDS = [
    container("memory", "", _SRV,
              "A container for memory diagnostics commands"),
]

SUBCOMMANDS = {  # in Redis 7.0's order (COMMAND INFO lists them so)
    "memory": [
        command("memory|doctor", 2, "", memory_doctor, group=_SRV,
                summary="Outputs memory problems report"),
        command("memory|help", 2, "loading stale", memory_help, group=_SRV,
                summary="Show helpful text about the different subcommands"),
        command("memory|stats", 2, "", memory_stats, group=_SRV,
                summary="Show memory usage details"),
        command("memory|malloc-stats", 2, "", memory_malloc_stats, group=_SRV,
                summary="Show allocator internal stats"),
        command("memory|usage", -3, "readonly", memory_usage, (2, 2, 1), group=_SRV,
                summary="Estimate the memory usage of a key"),
        command("memory|purge", 2, "", memory_purge, group=_SRV,
                summary="Ask the allocator to release memory"),
    ],
}
