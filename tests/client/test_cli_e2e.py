"""`emqd-worker` against a real emqd when things are wrong: a refused password or queue
ends it with one line that names the cause; so does a handler that cannot be loaded;
and the progress lines' rate is each line's own.

Workers are `python -m emqd.client` subprocesses with a timeout, so a worker that
retries forever fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from emqd.client import SyncQueue
from tests.support import ROOT, ServerProcess, start_emqd

pytestmark = pytest.mark.slow
PASSWORD = "sekret-pw"


def run_worker(*args: str, cwd: Path | str = ROOT, timeout: float = 20,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    full_env.pop("EMQD_URL", None)
    return subprocess.run([sys.executable, "-m", "emqd.client", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def locked() -> Iterator[ServerProcess]:
    server = start_emqd("--requirepass", PASSWORD)
    yield server
    server.stop()


@pytest.mark.parametrize(("password", "cause"), [
    ("wrong", "AuthenticationError: invalid username-password pair or user is disabled."),
    # The worker's own handshake (emqd/client/connection.py): its CLIENT SETNAME is refused.
    (None, "AuthenticationError: Authentication required."),
])
def test_a_refused_password_ends_the_worker_naming_it(
        locked: ServerProcess, password: str | None, cause: str) -> None:
    """It used to retry forever, logging `connection lost` once."""
    auth = f":{password}@" if password else ""
    done = run_worker("tests.client.e2e_handlers:quick", "--queue", "mail",
                      "--url", f"redis://{auth}127.0.0.1:{locked.port}")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stderr
    assert last.startswith(f"emqd-worker: queue mail on redis://{':***@' if password else ''}"
                           f"127.0.0.1:{locked.port}: claim refused: {cause}")
    assert "check the password" in last
    assert "Traceback" not in done.stderr and (password is None or password not in done.stderr)


def test_a_queue_the_server_refuses_ends_the_worker(emqd_port: int, r: redis.Redis) -> None:
    r.hset("emq:{mail}:pending", "not", "a sorted set")
    done = run_worker("tests.client.e2e_handlers:quick", "--queue", "mail",
                      "--url", f"redis://127.0.0.1:{emqd_port}")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(
        "claim refused: ResponseError: WRONGTYPE Operation against a key holding the wrong "
        "kind of value")


@pytest.mark.parametrize(("args", "message"), [
    (["--queue", "x" * 300], "invalid queue name"),
    (["--queue", "a{b}"], "invalid queue name"),
    (["--queue", "mail", "--lease-ms", "1"], "lease_ms must be >= 3"),
    (["--queue", "mail", "--beat-ms", "0"], "beat_ms >= 1"),
    (["--queue", "mail", "--url", "ftp://example.com"], "Redis URL must specify"),
])
def test_settings_refused_before_connecting_are_usage_errors(args: list[str],
                                                             message: str) -> None:
    done = run_worker("tests.client.e2e_handlers:quick", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("module", "spec", "line"), [
    (None, "nosuch_tasks:send", "emqd-worker: cannot import handler nosuch_tasks:send: "
     "ModuleNotFoundError: No module named 'nosuch_tasks'"),
    ("import nosuch_dependency\n", "tasks:send", "emqd-worker: cannot import handler tasks:send: "
     "ModuleNotFoundError: No module named 'nosuch_dependency' ({dir}/tasks.py, line 1)"),
    ("x = 1\nundefined_name\n", "tasks:send", "emqd-worker: cannot import handler tasks:send: "
     "NameError: name 'undefined_name' is not defined ({dir}/tasks.py, line 2)"),
    ("def send(job:\n", "tasks:send", "emqd-worker: cannot import handler tasks:send: "
     "SyntaxError: "),
    ("def other(job):\n    pass\n", "tasks:send", "emqd-worker: cannot find handler "
     "tasks:send: tasks has no 'send'"),
])
def test_an_unloadable_handler_is_one_line_naming_it(tmp_path: Path, module: str | None,
                                                    spec: str, line: str) -> None:
    """It used to be a raw traceback."""
    if module is not None:
        (tmp_path / "tasks.py").write_text(module)
    done = run_worker(spec, "--queue", "mail", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(line.format(dir=tmp_path)), done.stderr


def test_each_progress_line_counts_since_the_one_before_the_last_one_too(
        emqd_port: int) -> None:
    """The line printed on exit used to be the whole run's average."""
    url = f"redis://127.0.0.1:{emqd_port}"
    with SyncQueue("mail", url) as mail:
        mail.add_many([b"x"] * 20)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "emqd.client", "tests.client.e2e_handlers:quick", "--queue",
         "mail", "--url", url, "--progress-interval", "0.2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while len([ln for ln in lines if "done=20" in ln]) < 3:
            assert time.monotonic() < deadline, lines
            line = worker.stderr.readline()  # type: ignore[union-attr]
            assert line, lines
            if line.startswith("emqd-worker mail:"):
                lines.append(line.strip())
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=15)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)
    assert worker.returncode == 0
    final = [ln for ln in rest.splitlines() if ln.startswith("emqd-worker mail:")][-1]
    assert lines[-1].endswith("rate=0.0/s")  # the 20 jobs were done two lines before
    assert final == "emqd-worker mail: done=20 failed=0 dead=0 lost=0 rate=0.0/s"
