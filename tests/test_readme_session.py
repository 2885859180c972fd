"""README.md's redis-cli session is true, run the way docs/PROTOCOL.md's sessions are;
and the two sessions, run one after the other on one server, do not trip on each other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import ROOT, start_emqd
from tests.test_protocol_doc import DOC, run_step, steps

README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None,
                                reason="redis-cli is not installed")


def readme_session() -> list:
    return [s for s in steps(README.read_text()) if s.command.startswith("redis-cli -p 6390")]


def test_the_readme_session_answers_what_it_shows(tmp_path: Path) -> None:
    session = readme_session()
    assert len(session) >= 10
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))  # the default, as the README
    try:
        for step in session:
            run_step(step, server.port, "README.md")
    finally:
        server.stop()


def _queues(session: list) -> set[str]:
    """The queues a session's EMQ verbs name (EMQ.QUEUES and EMQ.EPOCH name none)."""
    words = [s.command.split() for s in session if s.command.startswith("redis-cli")]
    return {w[4] for w in words if w[3].startswith("EMQ.") and len(w) > 4}


def test_the_readme_and_the_protocol_walk_through_share_a_server(tmp_path: Path) -> None:
    """A reader who follows the README and then PROTOCOL.md (or the other way round) on
    the same server sees the replies both documents show: each starts clean, and their
    queues differ, so neither finds the other's jobs."""
    protocol = steps(DOC.read_text())
    readme = readme_session()
    assert not _queues(readme) & _queues(protocol)
    server = start_emqd("--appendonly", "yes", dir=str(tmp_path))
    try:
        for source, session in (("README.md", readme), ("PROTOCOL.md", protocol),
                                ("README.md", readme)):
            for step in session:
                run_step(step, server.port, source)
    finally:
        server.stop()
