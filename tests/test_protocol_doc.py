"""docs/PROTOCOL.md's redis-cli sessions are true: each `$` line runs against a real emqd.

Every ```console block of the document is one step of a single session, in
order, against one fresh server. A `$ redis-cli -p 6390 ...` line runs through
bash (so the quoting is the reader's) on the test server's port, with
`--no-raw` for the terminal form the document shows, and its output must be
the lines that follow it, where `<ms>` matches a time in milliseconds and
`<run_id>` the epoch. A `$ sleep n` line sleeps: it waits for housekeeping.

A command the document uses that emqd does not serve fails the test with its
name and line (a verb removed from the table must not pass silently); a `sleep`
needs the housekeeping planners (PROMOTE, STALLED.CHECK).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from emqd.dispatch import TABLE
from tests.support import ROOT, ServerProcess, start_emqd

DOC = ROOT / "docs" / "PROTOCOL.md"
PLACEHOLDERS = {"<ms>": r"\d{13}", "<run_id>": r"[0-9a-f]{40}", "<id>": r"\d+"}
HOUSEKEEPING_VERBS = (b"emq.promote", b"emq.stalled.check")


@dataclass
class Step:
    line: int
    command: str
    expected: list[str]


def steps(text: str) -> list[Step]:
    """The `$` lines of every console block, each with the output lines that follow it."""
    found: list[Step] = []
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = line.strip() == "```console"
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            found.append(Step(number, line[2:], []))
        else:
            assert found, f"PROTOCOL.md:{number}: output before any command"
            found[-1].expected.append(line)
    return found


def needed_verbs(step: Step) -> tuple[bytes, ...]:
    words = step.command.split()
    if words[0] == "sleep":
        return HOUSEKEEPING_VERBS
    assert words[:3] == ["redis-cli", "-p", "6390"], f"PROTOCOL.md:{step.line}: {step.command}"
    return (words[3].lower().encode(),)


def matches(expected: list[str], got: list[str]) -> bool:
    if len(expected) != len(got):
        return False
    for want, line in zip(expected, got, strict=True):
        pattern = re.escape(want)
        for placeholder, regex in PLACEHOLDERS.items():
            pattern = pattern.replace(re.escape(placeholder), regex)
        if not re.fullmatch(pattern, line):
            return False
    return True


def run_step(step: Step, port: int, source: str = "PROTOCOL.md") -> None:
    """Run one `$` line (a sleep sleeps) on `port`; its output must be what the document shows."""
    words = step.command.split()
    if words[0] == "sleep":
        time.sleep(float(words[1]))
        return
    command = step.command.replace("redis-cli -p 6390", f"redis-cli --no-raw -p {port}", 1)
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=10)
    got = done.stdout.splitlines()
    assert matches(step.expected, got), (
        f"{source}:{step.line}: $ {step.command}\nexpected:\n"
        + "\n".join(step.expected) + "\ngot:\n" + "\n".join(got) + done.stderr
    )


@pytest.fixture
def fresh_emqd() -> Iterator[ServerProcess]:
    server = start_emqd()
    yield server
    server.stop()


def test_the_document_has_sessions_to_run() -> None:
    all_steps = steps(DOC.read_text())
    assert len(all_steps) >= 20
    assert {"EMQ.ADD", "EMQ.CLAIM", "EMQ.FAIL", "EMQ.REVIVE"} <= {
        s.command.split()[3] for s in all_steps if s.command.startswith("redis-cli")
    }


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_every_redis_cli_line_answers_what_the_document_shows(fresh_emqd: ServerProcess) -> None:
    for step in steps(DOC.read_text()):
        missing = [verb.decode() for verb in needed_verbs(step) if verb not in TABLE]
        assert not missing, f"PROTOCOL.md:{step.line} needs {missing}, which emqd does not serve"
        run_step(step, fresh_emqd.port)
