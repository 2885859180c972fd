"""The emqd-worker command: finding the handler, the progress line, the entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emqd.client import Queue
from emqd.client.worker import Counts
from emqd.client.worker_command import Progress, build_parser, load_handler, progress_line
from tests.support import ROOT


def test_load_handler_finds_modules_in_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "clitasks_example.py").write_text(
        "class Jobs:\n    @staticmethod\n    def send(job):\n        return 'sent'\n"
        "def plain(job):\n    return 1\nVALUE = 3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert load_handler("clitasks_example:plain")(None) == 1
        assert load_handler("clitasks_example:Jobs.send")(None) == "sent"
        with pytest.raises(SystemExit, match="not callable"):
            load_handler("clitasks_example:VALUE")
    finally:
        sys.modules.pop("clitasks_example", None)
    for bad in ("no_colon", ":f", "m:"):
        with pytest.raises(SystemExit, match="module:function"):
            load_handler(bad)


def test_progress_line_counts_done_failed_and_the_rate_since_the_last_line() -> None:
    counts = Counts(completed=120, failed=30, dead=4, lost=1)
    line = progress_line("mail", counts, done_before=100, elapsed_s=10.0)
    assert line == "emqd-worker mail: done=120 failed=30 dead=4 lost=1 rate=5.0/s"
    assert progress_line("mail", Counts(), 0, 0.0).endswith("rate=0.0/s")


def test_progress_lines_each_count_since_the_line_before() -> None:
    counts = Counts()
    progress = Progress("mail", counts, now_s=100.0)
    counts.completed = 50
    assert progress.line(110.0).endswith("done=50 failed=0 dead=0 lost=0 rate=5.0/s")
    counts.completed, counts.failed = 60, 10
    assert progress.line(130.0).endswith("done=60 failed=10 dead=0 lost=0 rate=1.0/s")
    assert progress.line(131.0).endswith("rate=0.0/s")  # the last line, at exit: its own rate


def test_parser_defaults_and_required_queue() -> None:
    args = build_parser().parse_args(["m:f", "--queue", "q"])
    assert (args.concurrency, args.lease_ms, args.timeout_ms, args.url) == (10, 30000, None, None)
    assert args.beat_ms == 2000
    assert build_parser().parse_args(["m:f", "--queue", "q", "--beat-ms", "250"]).beat_ms == 250
    with pytest.raises(SystemExit):
        build_parser().parse_args(["m:f"])


def test_url_may_name_several_fronts() -> None:
    args = build_parser().parse_args(["m:f", "--queue", "q", "--url", "redis://:pw@a:1,b:2"])
    assert Queue(args.queue, args.url).routes.seeds == ["redis://:pw@a:1", "redis://:pw@b:2"]


def test_python_dash_m_emqd_worker_is_the_same_command() -> None:
    done = subprocess.run([sys.executable, "-m", "emqd.client", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert "usage: emqd-worker" in done.stdout and "--concurrency" in done.stdout
