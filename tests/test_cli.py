"""The command line (protocol section 10): flags, EMQD_* variables, strict protected mode."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from emqd import __version__, core_build
from emqd.cli import config_from
from emqd.config import Config
from tests.support import ROOT, RawClient, start_emqd


def test_defaults() -> None:
    config = config_from([], {})
    assert config == Config()
    assert (config.bind, config.port, config.dir, config.appendonly) == (
        "127.0.0.1", 6390, ".", True)
    assert (config.appendfsync, config.max_payload, config.maxclients) == (
        "everysec", 16 << 20, 10000)
    assert config.http_port == 6391
    assert config_from([], {"EMQD_HTTP_PORT": "0"}).http_port == 0  # off


def test_every_flag_has_an_env_variable_and_flags_win() -> None:
    env = {"EMQD_PORT": "7000", "EMQD_APPENDONLY": "no", "EMQD_REQUIREPASS": "pw",
           "EMQD_AOF_REWRITE_MIN_SIZE": "1024", "EMQD_LOGLEVEL": "debug", "EMQD_MAXCLIENTS": "5"}
    config = config_from([], env)
    assert (config.port, config.appendonly, config.requirepass) == (7000, False, "pw")
    assert (config.aof_rewrite_min_size, config.loglevel, config.maxclients) == (1024, "debug", 5)
    config = config_from(["--port", "7001", "--appendonly", "yes", "--max-payload", "10"], env)
    assert (config.port, config.appendonly, config.max_payload) == (7001, True, 10)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--port", "x"], {}, "--port must be an integer"),
        (["--port", "70000"], {}, "--port must be at most 65535"),
        (["--http-port", "70000"], {}, "--http-port must be at most 65535"),
        ([], {"EMQD_HTTP_PORT": "web"}, "--http-port must be an integer"),
        (["--maxclients", "-1"], {}, "must not be negative"),
        (["--appendfsync", "sometimes"], {}, "invalid choice"),
        ([], {"EMQD_APPENDFSYNC": "sometimes"}, "--appendfsync must be one of"),
        (["--nosuch"], {}, "unrecognized arguments"),
        (["--bind", "0.0.0.0"], {}, "refusing to listen on 0.0.0.0 without a password"),
        (["--bind", "::"], {}, "refusing to listen on :: without a password"),
        ([], {"EMQD_BIND": "10.1.2.3"}, "refusing to listen on 10.1.2.3"),
        (["--port", "0"], {}, "--port 0 turns the plain port off: give a --tls-port"),
        (["--tls-port", "70000"], {}, "--tls-port must be at most 65535"),
        (["--tls-port", "6390"], {}, "--port and --tls-port must differ"),
        (["--tls-port", "6391", "--tls-cert-file", "c"], {},
         "--tls-port needs --tls-cert-file and --tls-key-file"),
        (["--tls-port", "6391", "--tls-cert-file", "c", "--tls-key-file", "k"], {},
         "--tls-auth-clients yes needs --tls-ca-cert-file"),
        ([], {"EMQD_TLS_PORT": "6391", "EMQD_TLS_CERT_FILE": "c", "EMQD_TLS_KEY_FILE": "k",
              "EMQD_TLS_AUTH_CLIENTS": "optional"}, "--tls-auth-clients optional needs"),
        (["--tls-auth-clients", "maybe"], {}, "invalid choice"),
    ],
)
def test_bad_settings_exit_with_a_clear_message(
    argv: list[str], env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        config_from(argv, env)
    assert exit_.value.code != 0
    assert message in capsys.readouterr().err


def test_tls_settings_read_like_redis_s() -> None:
    config = config_from(["--port", "0", "--tls-port", "6380", "--tls-cert-file", "c",
                          "--tls-key-file", "k", "--tls-auth-clients", "no"], {})
    assert (config.port, config.tls_port, config.tls_auth_clients) == (0, 6380, "no")
    assert (config.tls_cert_file, config.tls_key_file, config.tls_ca_cert_file) == ("c", "k", None)


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_password(bind: str) -> None:
    assert config_from(["--bind", bind], {}).bind == bind


def test_a_password_allows_any_address() -> None:
    assert config_from(["--bind", "0.0.0.0"], {"EMQD_REQUIREPASS": "pw"}).requirepass == "pw"


def test_protected_mode_refuses_to_start_as_a_process() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EMQD_BIND="0.0.0.0")
    env.pop("EMQD_REQUIREPASS", None)
    done = subprocess.run([sys.executable, "-m", "emqd", "--port", "1"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "refusing to listen on 0.0.0.0 without a password" in done.stderr
    assert "--requirepass (or EMQD_REQUIREPASS)" in done.stderr


def test_the_process_reads_its_settings_from_the_environment() -> None:
    server = start_emqd(env={"EMQD_REQUIREPASS": "from-env", "EMQD_MAXCLIENTS": "7"})
    try:
        client = RawClient(server.port)
        assert client.command("PING") == b"-NOAUTH Authentication required.\r\n"
        assert client.command("AUTH", "from-env") == b"+OK\r\n"
        assert client.command("CONFIG", "GET", "maxclients") == (
            b"*2\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n")
        client.close()
    finally:
        server.stop()


def _run_emqd(*flags: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("EMQD_REQUIREPASS", None)
    return subprocess.run([sys.executable, "-m", "emqd", *flags], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("flag", ["--version", "-v"])
def test_version(flag: str) -> None:
    done = _run_emqd(flag)
    assert (done.returncode, done.stdout) == (0, f"emqd {__version__} ({core_build()} core)\n")


def test_a_busy_port_is_named_and_found_before_the_log_is_read(tmp_path: Path) -> None:
    """The log here is damaged: were it read first, the error would be about the file."""
    damaged = b"*2\r\n$3\r\nDEL\r\n$x\r\n" + b"*2\r\n$3\r\nDEL\r\n$1\r\na\r\n"
    (tmp_path / "emqd.aof").write_bytes(damaged)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _run_emqd("--port", str(port), "--dir", str(tmp_path))
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (--port): Address already in use" in done.stderr
    assert "byte offset" not in done.stderr
    assert (tmp_path / "emqd.aof").read_bytes() == damaged


def test_a_busy_ipv6_port_is_named_in_brackets() -> None:
    with socket.socket(socket.AF_INET6) as busy:
        busy.bind(("::1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _run_emqd("--bind", "::1", "--port", str(port), "--appendonly", "no")
    assert done.returncode == 1
    assert f"cannot listen on [::1]:{port} (--port): Address already in use" in done.stderr


# --- issue 25, item 6: a --help that explains, no abbreviations, every failure named ---------
def test_help_says_what_every_flag_does_and_its_unit() -> None:
    done = _run_emqd("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps the lines
    for flag in ("--stalled-interval", "--id-base", "--max-payload", "--keep-completed-ms",
                 "--pubsub-soft-seconds", "--aof-rewrite-min-size", "--http-port"):
        assert flag in text
    assert "How often the server looks for expired leases" in text
    assert "milliseconds" in text and "bytes" in text and "seconds" in text
    from emqd.cli import FLAG_HELP
    assert set(FLAG_HELP) == {f.name for f in __import__("dataclasses").fields(Config)}


@pytest.mark.parametrize("argv", [["--requirepas", "x"], ["--http", "0"], ["--stalled", "5"]])
def test_an_abbreviated_flag_is_refused(argv: list[str]) -> None:
    """`emqd --requirepas x` started a server with that password."""
    with pytest.raises(SystemExit):
        config_from(argv, {})


def test_a_busy_http_port_is_named_with_its_flag_before_the_log_is_read(tmp_path: Path) -> None:
    damaged = b"*2\r\n$3\r\nDEL\r\n$x\r\n"
    (tmp_path / "emqd.aof").write_bytes(damaged)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _run_emqd("--port", str(_free()), "--http-port", str(port), "--dir",
                         str(tmp_path))
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (--http-port): Address already in use" in (
        done.stderr)
    assert "byte offset" not in done.stderr


def test_a_missing_dir_is_named_with_its_flag(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = _run_emqd("--port", str(_free()), "--http-port", "0", "--dir", str(missing))
    assert done.returncode != 0
    assert f"--dir {missing}: no such directory" in done.stderr


def _free() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
