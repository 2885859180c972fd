"""Throwaway TLS certificates for the tests, made by the `openssl` binary.

A CA, a server certificate it signs (for 127.0.0.1 and localhost), a client
certificate it signs, and a client certificate signed by another CA (one the
server does not trust). EC P-256 keys: fast to make, and what Redis's own
test suite uses too. scripts/test installs Debian's `openssl` when missing.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_CA_EXTENSIONS = (
    "basicConstraints=critical,CA:TRUE\n"
    "keyUsage=critical,keyCertSign,cRLSign\n"
    "subjectKeyIdentifier=hash\n"
)
_LEAF_EXTENSIONS = (
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature\n"
    "subjectKeyIdentifier=hash\n"
    "authorityKeyIdentifier=keyid\n"
)
_SERVER_EXTENSIONS = _LEAF_EXTENSIONS + (
    "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n")
_CLIENT_EXTENSIONS = _LEAF_EXTENSIONS + "extendedKeyUsage=clientAuth\n"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # a client certificate from a CA the server does not trust
    rogue_key: Path


def openssl_path() -> str | None:
    return shutil.which("openssl")


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True,
                   timeout=30)


def _key(name: str, cwd: Path) -> Path:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key", cwd=cwd)
    return cwd / f"{name}.key"


def _ca(name: str, cwd: Path) -> tuple[Path, Path]:
    key = _key(name, cwd)
    _openssl("req", "-new", "-x509", "-key", key, "-out", f"{name}.crt", "-days", "2",
             "-subj", f"/CN={name}", "-extensions", "v3", "-config", _config(cwd, name),
             cwd=cwd)
    return cwd / f"{name}.crt", key


def _config(cwd: Path, name: str) -> Path:
    """A minimal openssl config whose [v3] section is the CA's extensions."""
    path = cwd / f"{name}.cnf"
    path.write_text("[req]\ndistinguished_name=dn\n[dn]\n[v3]\n" + _CA_EXTENSIONS)
    return path


def _signed(name: str, extensions: str, ca: tuple[Path, Path], cwd: Path) -> tuple[Path, Path]:
    key = _key(name, cwd)
    _openssl("req", "-new", "-key", key, "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", ca[0], "-CAkey", ca[1],
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
             "-extfile", f"{name}.ext", cwd=cwd)
    return cwd / f"{name}.crt", key


def make_certificates(directory: Path) -> Certificates:
    ca = _ca("emqd-test-ca", directory)
    server = _signed("server", _SERVER_EXTENSIONS, ca, directory)
    client = _signed("client", _CLIENT_EXTENSIONS, ca, directory)
    rogue_ca = _ca("rogue-ca", directory)
    rogue = _signed("rogue", _CLIENT_EXTENSIONS, rogue_ca, directory)
    return Certificates(ca[0], *server, *client, *rogue)
