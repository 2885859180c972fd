"""TLS with Redis's option names: redis-cli --tls, redis-py ssl=True, client certificates.

Certificates are made for this run by the `openssl` binary (tests/tls.py);
every server listens on loopback only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from emqd.client import SyncQueue
from tests.support import ROOT, RawClient, ServerProcess, encode_request, free_port, start_emqd
from tests.tls import Certificates, make_certificates, openssl_path

pytestmark = pytest.mark.skipif(openssl_path() is None,
                                reason="openssl is not installed (scripts/test installs it)")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def tls_flags(certs: Certificates, tls_port: int, auth_clients: str = "yes") -> list[str]:
    return ["--tls-port", str(tls_port), "--tls-cert-file", str(certs.server_cert),
            "--tls-key-file", str(certs.server_key), "--tls-ca-cert-file", str(certs.ca),
            "--tls-auth-clients", auth_clients]


def start_tls_only(certs: Certificates, auth_clients: str = "yes",
                   *flags: str) -> ServerProcess:
    """An emqd with `--port 0`: TLS is its only port (waited for as a TCP port)."""
    port = free_port()
    return start_emqd("--port", "0", *tls_flags(certs, port, auth_clients), *flags, port=port)


@pytest.fixture(scope="module", params=["yes", "optional", "no"])
def tls_server(request: pytest.FixtureRequest, certs: Certificates) -> Iterator[ServerProcess]:
    server = start_tls_only(certs, request.param)
    server.auth_clients = request.param  # type: ignore[attr-defined]
    yield server
    server.stop()


def tls_client(port: int, certs: Certificates, cert: Path | None = None,
               key: Path | None = None, **options: object) -> redis.Redis:
    """redis-py over TLS, without its retries (a refused handshake fails at once)."""
    return redis.Redis(port=port, ssl=True, ssl_ca_certs=str(certs.ca),
                       ssl_certfile=cert and str(cert), ssl_keyfile=key and str(key),
                       socket_timeout=5, retry=Retry(NoBackoff(), 0), **options)


def redis_cli(port: int, certs: Certificates, *args: str,
              client_cert: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["redis-cli", "--tls", "--cacert", str(certs.ca), "-p", str(port)]
    if client_cert:
        argv += ["--cert", str(certs.client_cert), "--key", str(certs.client_key)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=10)


def test_redis_py_with_a_client_certificate_works_on_every_setting(
        tls_server: ServerProcess, certs: Certificates) -> None:
    with tls_client(tls_server.port, certs, certs.client_cert, certs.client_key) as client:
        assert client.ping() is True
        assert client.hset("h", "f", "v") == 1
        assert client.hget("h", "f") == b"v"
        assert client.config_get("tls-auth-clients") == {
            "tls-auth-clients": tls_server.auth_clients}  # type: ignore[attr-defined]
        assert client.config_get("port") == {"port": "0"}
        assert client.delete("h") == 1


def test_without_a_certificate_only_yes_refuses(tls_server: ServerProcess,
                                                certs: Certificates) -> None:
    client = tls_client(tls_server.port, certs)
    try:
        if tls_server.auth_clients == "yes":  # type: ignore[attr-defined]
            with pytest.raises(redis.ConnectionError):
                client.ping()
        else:
            assert client.ping() is True
    finally:
        client.close()


def test_a_certificate_from_another_ca_is_refused_unless_none_is_asked(
        tls_server: ServerProcess, certs: Certificates) -> None:
    client = tls_client(tls_server.port, certs, certs.rogue_cert, certs.rogue_key)
    try:
        if tls_server.auth_clients == "no":  # type: ignore[attr-defined]
            assert client.ping() is True  # the server does not ask, so it never checks
        else:
            with pytest.raises(redis.ConnectionError):
                client.ping()
    finally:
        client.close()


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_redis_cli_tls(tls_server: ServerProcess, certs: Certificates) -> None:
    done = redis_cli(tls_server.port, certs, "ECHO", "over tls")
    assert (done.returncode, done.stdout) == (0, "over tls\n"), done.stderr
    bare = redis_cli(tls_server.port, certs, "PING", client_cert=False)
    if tls_server.auth_clients == "yes":  # type: ignore[attr-defined]
        assert bare.returncode != 0 and "PONG" not in bare.stdout
    else:
        assert (bare.returncode, bare.stdout) == (0, "PONG\n"), bare.stderr


def test_a_plain_client_on_the_tls_port_is_refused_and_the_server_goes_on(
        tls_server: ServerProcess, certs: Certificates) -> None:
    plain = RawClient(tls_server.port)
    try:
        plain.send(encode_request("PING"))
        answer = plain.read_until_closed()
    finally:
        plain.close()
    assert b"PONG" not in answer
    assert not answer or answer[0] == 0x15  # nothing, or a TLS alert record
    with tls_client(tls_server.port, certs, certs.client_cert, certs.client_key) as client:
        assert client.ping() is True


def test_plain_and_tls_ports_together_share_one_keyspace_and_one_password(
        certs: Certificates) -> None:
    tls_port = free_port()
    server = start_emqd(*tls_flags(certs, tls_port), "--requirepass", "pw")
    try:
        with tls_client(tls_port, certs, certs.client_cert, certs.client_key) as secure:
            with pytest.raises(redis.AuthenticationError):
                secure.ping()  # protected by the password as the plain port is
        secure = tls_client(tls_port, certs, certs.client_cert, certs.client_key, password="pw")
        with secure, redis.Redis(port=server.port, password="pw") as plain:
            assert secure.hset("shared", "f", "tls") == 1
            assert plain.hget("shared", "f") == b"tls"
            assert plain.config_get("tls-port") == {"tls-port": str(tls_port)}
    finally:
        server.stop()


def test_the_python_client_speaks_rediss(certs: Certificates) -> None:
    server = start_tls_only(certs, "yes")
    try:
        url = f"rediss://127.0.0.1:{server.port}"
        with SyncQueue("tls-mail", url, ssl_ca_certs=str(certs.ca),
                       ssl_certfile=str(certs.client_cert),
                       ssl_keyfile=str(certs.client_key)) as mail:
            job_id = mail.add(b"hello")
            (job,) = mail.claim(30000)
            assert (job.id, job.payload) == (job_id, b"hello")
            mail.complete(job)
            assert mail.stats().completed == 1
    finally:
        server.stop()


def test_the_settings_come_from_the_environment_too(certs: Certificates) -> None:
    port = free_port()
    env = {"EMQD_TLS_PORT": str(port), "EMQD_TLS_CERT_FILE": str(certs.server_cert),
           "EMQD_TLS_KEY_FILE": str(certs.server_key), "EMQD_TLS_AUTH_CLIENTS": "no"}
    server = start_emqd("--port", "0", port=port, env=env)
    try:
        with redis.Redis(port=port, ssl=True, ssl_ca_certs=str(certs.ca)) as client:
            assert client.ping() is True  # no client certificate: EMQD_TLS_AUTH_CLIENTS=no
            assert client.config_get("tls-*-file") == {
                "tls-cert-file": str(certs.server_cert), "tls-key-file": str(certs.server_key),
                "tls-ca-cert-file": ""}
    finally:
        server.stop()


def _start_and_fail(*flags: str,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    full_env.pop("EMQD_REQUIREPASS", None)
    return subprocess.run([sys.executable, "-m", "emqd", "--appendonly", "no", *flags],
                          env=full_env, capture_output=True, text=True, timeout=30)


def test_protected_mode_applies_to_the_tls_port(certs: Certificates) -> None:
    done = _start_and_fail("--bind", "0.0.0.0", "--port", "0", *tls_flags(certs, free_port()))
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a password" in done.stderr


@pytest.mark.parametrize(("change", "message"), [
    ({"--tls-cert-file": "/nonexistent/server.crt"},
     "cannot load --tls-cert-file /nonexistent/server.crt"),
    ({"--tls-ca-cert-file": "/nonexistent/ca.crt"},
     "cannot load --tls-ca-cert-file /nonexistent/ca.crt"),
    ({"--tls-key-file": "CA"}, "cannot load --tls-cert-file"),  # the CA's key is not the server's
])
def test_an_unusable_certificate_is_named_and_stops_the_start(
        certs: Certificates, change: dict[str, str], message: str) -> None:
    flags = tls_flags(certs, free_port())
    for flag, value in change.items():
        flags[flags.index(flag) + 1] = str(certs.ca.with_suffix(".key")) if value == "CA" else value
    done = _start_and_fail("--port", "0", *flags)
    assert done.returncode == 1, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
