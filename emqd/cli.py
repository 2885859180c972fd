"""The command line: flags and `EMQD_*` variables -> Config -> run the server."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from dataclasses import fields

from emqd import __version__, core_build
from emqd.commands.parameters import memtoull
from emqd.config import LOG_LEVELS, Config
from emqd.flag_help import FLAG_HELP

_YES_NO = {"yes": True, "no": False}
# integer flags whose default (None) is worked out at start
_OPTIONAL_INTS = {"id_base", "cluster_acks"}
_MEMORY = {"maxmemory"}  # sizes with Redis's units (`512mb`, `2gb`), as CONFIG SET reads them
_CHOICES = {
    "appendonly": ["yes", "no"],
    "appendfsync": ["always", "everysec", "no"],
    "loglevel": list(LOG_LEVELS),
    "tls_auth_clients": ["yes", "no", "optional"],
    "maxmemory_policy": ["noeviction"],  # emqd never evicts (CONFIG SET says why)
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return "EMQD_" + name.upper()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="emqd",
        description="A job-queue server that speaks the Redis protocol. "
        "Every flag can also be given as EMQD_<FLAG> (dashes as underscores).",
        allow_abbrev=False,  # `--requirepas x` must not set the password
    )
    parser.add_argument("-v", "--version", action="version",
                        version=f"emqd {__version__} ({core_build()} core)")
    parser.add_argument("--check-aof", metavar="FILE",
                        help="check an append-only file as a start would read it, say where "
                        "any damage starts and what cutting there would drop, and exit "
                        "(docs/PERSISTENCE.md)")
    parser.add_argument("--migrate-to-cluster", metavar="HOST:PORT[,...]",
                        help="write the queues of the append-only file in --dir into this "
                        "cluster (its seed nodes), for fronts to serve, and exit: once, with "
                        "this emqd stopped and before the fronts serve them "
                        "(docs/CLUSTER.md, 'Moving from one emqd to a cluster')")
    parser.add_argument("--fix", action="store_true",
                        help="with --check-aof: cut a damaged file there, after keeping a copy "
                        "of the whole file beside it")
    defaults = Config()
    for f in fields(Config):
        default = getattr(defaults, f.name)
        shown = ({True: "yes", False: "no"}[default] if type(default) is bool
                 else default)
        parser.add_argument(
            _flag(f.name),
            dest=f.name,
            default=None,
            choices=_CHOICES.get(f.name),
            metavar=None if f.name in _CHOICES else f.name.upper(),
            help=f"{FLAG_HELP[f.name]} (default: {shown!s}; env {_env(f.name)})",
        )
    return parser


def config_from(argv: list[str], environ: dict[str, str]) -> Config:
    """Flags win over the environment, which wins over the defaults."""
    parser = build_parser()
    args = parser.parse_args(argv)
    defaults = Config()
    values: dict[str, object] = {}
    for f in fields(Config):
        raw = getattr(args, f.name)
        if raw is None:
            raw = environ.get(_env(f.name))
        if raw is None:
            continue
        default = getattr(defaults, f.name)
        if f.name in _CHOICES and raw not in _CHOICES[f.name]:
            parser.error(f"{_flag(f.name)} must be one of {', '.join(_CHOICES[f.name])}")
        if type(default) is bool:
            values[f.name] = _YES_NO[raw]
        elif f.name in _MEMORY:
            size = memtoull(raw.encode())
            if size is None:
                parser.error(f"{_flag(f.name)} must be a size in bytes (512mb, 2gb, ...), "
                             f"not {raw!r}")
            values[f.name] = size
        elif type(default) is int or f.name in _OPTIONAL_INTS:
            try:
                number = int(raw)
            except ValueError:
                parser.error(f"{_flag(f.name)} must be an integer, not {raw!r}")
            if number < 0:
                parser.error(f"{_flag(f.name)} must not be negative")
            values[f.name] = number
        else:
            values[f.name] = raw
    config = Config(**values)  # type: ignore[arg-type]
    for name in ("port", "tls_port", "http_port"):
        if getattr(config, name) > 65535:
            parser.error(f"{_flag(name)} must be at most 65535")
    problem = _listening_problem(config)
    if problem:
        parser.error(problem)
    if not os.path.isdir(config.dir):
        parser.error(f"--dir {config.dir}: no such directory")
    if not config.requirepass and not _is_loopback(config.bind):
        parser.error(
            f"refusing to listen on {config.bind} without a password: "
            "set --requirepass (or EMQD_REQUIREPASS), or bind to 127.0.0.1"
        )
    return config


def _listening_problem(config: Config) -> str | None:
    """Why the ports and TLS files asked for cannot work together, if they cannot."""
    if not config.port and not config.tls_port:
        return "--port 0 turns the plain port off: give a --tls-port, or nothing listens"
    if not config.tls_port:
        return None
    if config.tls_port == config.port:
        return f"--port and --tls-port must differ (both {config.port})"
    if not config.tls_cert_file or not config.tls_key_file:
        return "--tls-port needs --tls-cert-file and --tls-key-file"
    if config.tls_auth_clients != "no" and not config.tls_ca_cert_file:
        return (f"--tls-auth-clients {config.tls_auth_clients} needs --tls-ca-cert-file "
                "(the CA that signs the clients' certificates), or set --tls-auth-clients no")
    return None


def _is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.check_aof is not None:
        from emqd.persist.check import main as check_aof

        sys.exit(check_aof(args.check_aof, args.fix))
    if args.fix:
        parser.error("--fix goes with --check-aof FILE")
    config = config_from(argv, dict(os.environ))
    if args.migrate_to_cluster is not None:
        from emqd.cluster.front import node_auth
        from emqd.cluster.migrate import main as migrate

        sys.exit(migrate(config.dir, args.migrate_to_cluster,
                         config.cluster_timeout_ms / 1000, node_auth(config)))
    from emqd.serve.lifecycle import run

    sys.exit(run(config))
