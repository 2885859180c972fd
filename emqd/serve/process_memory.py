"""The process's memory as the kernel sees it, for INFO memory and MEMORY STATS.

The data's own bytes are the keyspace's running total (store/sizes.py,
`Keyspace.used`); what the process holds besides (the interpreter, its modules,
buffers) is measured once, as the resident size when the server state is made,
before the log loads: INFO's `used_memory_startup`. Their sum is `used_memory`,
which `maxmemory` bounds (docs/SERVER.md). The resident size itself (RSS) is
read from /proc when asked, never on a request's path.
"""

from __future__ import annotations

import os
import resource


def rss_bytes() -> int:
    """The resident set size now."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def total_system_memory() -> int:
    """The machine's memory (INFO's total_system_memory), 0 when unknown."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def human(size: int) -> str:
    """Redis's bytesToHuman: `512B`, `1.50K`, `2.00M`, ..."""
    for unit, scale in (("P", 1 << 50), ("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20),
                        ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.2f}{unit}"
    return f"{size}B"
