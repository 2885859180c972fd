"""serve/lifecycle.py: importing the server does not import the cluster front or the HTTP
side (they bring redis-py and aiohttp, a quarter of a second of every start): they are
imported where they are built, when the config asks for them (tests/cluster and
tests/http start servers that do)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("redis", "aiohttp")


def test_importing_the_server_brings_neither_redis_py_nor_aiohttp() -> None:
    probe = ("import sys, emqd.cli, emqd.serve.lifecycle\n"
             f"print(*[name for name in {HEAVY!r} if name in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == []
