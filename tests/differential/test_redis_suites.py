"""Redis's own test units for the two families emqd holds, run against emqd.

`unit/type/zset` and `unit/type/hash` of Redis 7.0's suite (Debian's source of
the redis package: scripts/redis-suite unpacks its `tests/` outside the
repository and installs tclsh), in external mode on one emqd:

    tclsh tests/test_helper.tcl --host 127.0.0.1 --port P --single unit/type/zset
        --singledb --clients 1 --skipfile EXCLUDED

Every test must pass but the ones in EXCLUDED, each with the reason emqd cannot
run it (docs/SERVER.md lists them): a data type emqd does not hold (SET, SADD:
strings and sets), DEBUG, replication, or a setting emqd does not have. The
suite's own `external:skip` tests are not run in external mode at all. The
counts of tests that passed are checked too, so a unit that stopped early (an
`[exception]` ends it) or a skip list that grew cannot pass unnoticed. Without
the suite (not root, no apt) the test is skipped, except with
EMQD_REQUIRE_REDIS=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support import ROOT, start_emqd

pytestmark = [pytest.mark.redis_reference, pytest.mark.slow, pytest.mark.timeout(600)]

SUITE_TIMEOUT_S = 420

_SET = "needs SET: emqd holds no strings"
_SADD = "needs SADD: emqd holds no sets (ZUNIONSTORE and its family accept sets as inputs)"
_DEBUG = "needs DEBUG"
_REPL = "needs a replica (replication)"
_DUMP = "needs DUMP and RESTORE (Redis's RDB serialization of a value), which emqd has not"

# Test name (as the suite prints it) -> why emqd cannot run it.
EXCLUDED: dict[str, dict[str, str]] = {
    "unit/type/zset": {
        **{f"{name} - {encoding}": _SADD for encoding in ("listpack", "skiplist")
           for name in ("ZUNIONSTORE with a regular set and weights",
                        "ZINTERSTORE with a regular set and weights",
                        "ZDIFFSTORE with a regular set")},
        "ZINTERSTORE regression with two sets, intset+hashtable": _SADD,
        "ZINTERSTORE #516 regression, mixed sets and ziplist zsets": _SADD,
        "ZPOPMIN with negative count": _SET,
        "ZPOPMAX with negative count": _SET,
        "ZPOP/ZMPOP against wrong type": _SET,
        "BZPOP/BZMPOP against wrong type": _SET,
        "BZPOPMIN, ZADD + DEL + SET should not awake blocked client": _SET,
        "BZMPOP_MIN, ZADD + DEL + SET should not awake blocked client": _SET,
        "ZRANGESTORE - src key wrong type": _SET,
        "ZMPOP propagate as pop with count command to replica": _REPL,
        "BZMPOP propagate as pop with count command to replica": _REPL,
        "ZSCORE after a DEBUG RELOAD - listpack": _DEBUG,
        "ZSCORE after a DEBUG RELOAD - skiplist": _DEBUG,
    },
    "unit/type/hash": {
        "HMGET against wrong type": _SET,
        "Is a ziplist encoded Hash promoted on big payload?": _DEBUG,
        "Hash ziplist of various encodings": _DUMP,
        "Hash ziplist of various encodings - sanitize dump": _DUMP,
    },
}
# The tests each unit must pass (all it runs in external mode, less EXCLUDED).
PASSED = {"unit/type/zset": 289, "unit/type/hash": 69}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RESULT = re.compile(r"^\[(ok|err|exception|skip|ignore)\]: (.*?)(?: \(\d+ ms\))?$")


def _suite() -> Path | None:
    """The unpacked `tests/` of Redis's source (scripts/redis-suite fetches it)."""
    given = os.environ.get("EMQD_REDIS_SUITE")
    if given:
        return Path(given)
    found = subprocess.run([str(ROOT / "scripts" / "redis-suite")], capture_output=True,
                           text=True, check=False).stdout.strip()
    return Path(found) if found and shutil.which("tclsh") else None


def run_unit(suite: Path, port: int, unit: str, excluded: dict[str, str]) -> tuple[str, int]:
    """Run one unit against the server on `port`; (its output without colours, exit code)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as skipfile:
        skipfile.write("".join(name + "\n" for name in excluded))
    argv = ["tclsh", "tests/test_helper.tcl", "--host", "127.0.0.1", "--port", str(port),
            "--single", unit, "--singledb", "--clients", "1", "--skipfile", skipfile.name,
            "--timeout", "120"]
    proc = subprocess.Popen(argv, cwd=suite.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=SUITE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        output += f"\n(killed after {SUITE_TIMEOUT_S} s)"
    finally:
        os.unlink(skipfile.name)
    return _ANSI.sub("", output), proc.returncode


def results(output: str) -> dict[str, list[str]]:
    """The test names under each outcome the suite printed (ok, err, exception, skip)."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = _RESULT.match(line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


@pytest.mark.parametrize("unit", sorted(EXCLUDED))
def test_redis_s_own_unit_passes(unit: str) -> None:
    suite = _suite()
    if suite is None:
        if os.environ.get("EMQD_REQUIRE_REDIS") == "1":
            pytest.fail("EMQD_REQUIRE_REDIS=1 but Redis's test suite (scripts/redis-suite) "
                        "or tclsh is missing")
        pytest.skip("Redis's test suite is not here: run scripts/redis-suite as root")
    server = start_emqd()
    try:
        output, code = run_unit(suite, server.port, unit, EXCLUDED[unit])
    finally:
        server.stop()
    found = results(output)
    failed = found.get("err", []) + found.get("exception", [])
    assert not failed, f"{unit}: {failed}\n{output[-6000:]}"
    assert code == 0, output[-6000:]
    assert set(found.get("skip", [])) == set(EXCLUDED[unit]), output[-3000:]
    assert len(found.get("ok", [])) == PASSED[unit], output[-3000:]
