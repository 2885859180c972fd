"""README.md's redis-cli session is true, run the way docs/PROTOCOL.md's sessions are."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT, start_emqd
from tests.test_protocol_doc import steps

README = ROOT / "README.md"


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_the_readme_session_answers_what_it_shows(tmp_path: Path) -> None:
    session = [s for s in steps(README.read_text()) if s.command.startswith("redis-cli -p 6390")]
    assert len(session) >= 10
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))  # the default, as the README
    try:
        for step in session:
            command = step.command.replace("redis-cli -p 6390", f"redis-cli --no-raw -p {server.port}")
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=10)
            got = done.stdout.splitlines()
            want = [re.escape(line).replace(re.escape("<id>"), r"\d+") for line in step.expected]
            assert len(got) == len(want), (step.line, step.command, got, done.stderr)
            for pattern, line in zip(want, got, strict=True):
                assert re.fullmatch(pattern, line), (step.line, step.command, got)
    finally:
        server.stop()
