"""How the benchmark speaks EMQ to each server: native verbs, or EVALSHA of Lua.

A `Target` turns one EMQ step into the encoded request for its server, so the
scenarios are written once and run unchanged against both. Replies have the
same shape on both (the Lua scripts in `emqd/bench/lua/` answer what the verbs
answer), so scenarios parse them once too. Key names come from `emqd.layout`,
the same module the verbs use, and the defaults the scripts need
(keep_completed, max_attempts, ...) from `emqd.config.Config`, the same
defaults the emqd under test starts with.
"""

from __future__ import annotations

from pathlib import Path

from emqd.bench.client import Client, ReplyError, encode
from emqd.bench.servers import Server
from emqd.config import Config
from emqd.layout import QUEUES, queue_keys

LUA_DIR = Path(__file__).resolve().parent / "lua"  # package data: works from any install
SCRIPTS = ("add", "claim", "complete", "fail", "promote", "stalled")
DEFAULTS = Config()


class Target:
    """One server under test; `name` is the column it fills in the table."""

    name = ""

    def __init__(self, server: Server) -> None:
        self.server = server

    @property
    def port(self) -> int:
        return self.server.port

    async def prepare(self, client: Client) -> None:
        """Anything the server needs before a scenario (scripts loaded, epoch read)."""

    async def missing(self, client: Client, verbs: tuple[str, ...]) -> list[str]:
        """Which of `verbs` this server cannot run yet."""
        return []

    def add(self, queue: bytes, payload: bytes) -> bytes:
        raise NotImplementedError

    def claim(self, queue: bytes, lease_ms: int) -> bytes:
        raise NotImplementedError

    def complete(self, queue: bytes, job_id: bytes, token: bytes) -> bytes:
        raise NotImplementedError

    def fail(self, queue: bytes, job_id: bytes, token: bytes, backoff_ms: int) -> bytes:
        raise NotImplementedError

    def promote(self, queue: bytes, limit: int) -> bytes:
        raise NotImplementedError

    def stalled_check(self, queue: bytes, limit: int) -> bytes:
        raise NotImplementedError


class EmqdTarget(Target):
    """emqd's own verbs."""

    name = "emqd"

    async def missing(self, client: Client, verbs: tuple[str, ...]) -> list[str]:
        # Too few arguments: a known verb answers an arity error, an unknown one
        # answers "unknown command".
        replies = await client.pipeline([encode(verb) for verb in verbs])
        return [
            verb for verb, reply in zip(verbs, replies, strict=True)
            if isinstance(reply, ReplyError) and "unknown command" in str(reply)
        ]

    def add(self, queue: bytes, payload: bytes) -> bytes:
        return encode(b"EMQ.ADD", queue, payload)

    def claim(self, queue: bytes, lease_ms: int) -> bytes:
        return encode(b"EMQ.CLAIM", queue, lease_ms)

    def complete(self, queue: bytes, job_id: bytes, token: bytes) -> bytes:
        return encode(b"EMQ.COMPLETE", queue, job_id, token)

    def fail(self, queue: bytes, job_id: bytes, token: bytes, backoff_ms: int) -> bytes:
        return encode(b"EMQ.FAIL", queue, job_id, token, b"ERROR", b"bench", b"BACKOFF",
                      backoff_ms)

    def promote(self, queue: bytes, limit: int) -> bytes:
        return encode(b"EMQ.PROMOTE", queue, b"LIMIT", limit)

    def stalled_check(self, queue: bytes, limit: int) -> bytes:
        return encode(b"EMQ.STALLED.CHECK", queue, b"LIMIT", limit)


class LuaTarget(Target):
    """redis-server running the scripts of `emqd/bench/lua/*.lua` by EVALSHA."""

    name = "redis"

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.sha: dict[str, bytes] = {}
        self.epoch = b""

    async def prepare(self, client: Client) -> None:
        if not self.sha:
            for name in SCRIPTS:
                path = LUA_DIR / f"{name}.lua"
                if not path.exists():
                    raise RuntimeError(f"Lua script {path} not found: a broken install")
                reply = await client.call(b"SCRIPT", b"LOAD", path.read_bytes())
                if isinstance(reply, ReplyError):
                    raise RuntimeError(f"{path}: {reply}")
                self.sha[name] = reply
        info = await client.call(b"INFO", b"server")
        for line in info.splitlines():
            if line.startswith(b"run_id:"):
                self.epoch = line.split(b":", 1)[1].strip()

    def _eval(self, script: str, keys: list[bytes], *args: bytes | int | str) -> bytes:
        return encode(b"EVALSHA", self.sha[script], len(keys), *keys, *args)

    def add(self, queue: bytes, payload: bytes) -> bytes:
        k = queue_keys(queue)
        return self._eval("add", [k.pending, k.meta, QUEUES], k.prefix, queue, payload)

    def claim(self, queue: bytes, lease_ms: int) -> bytes:
        k = queue_keys(queue)
        return self._eval("claim", [k.pending, k.active, k.dead], k.prefix, lease_ms, self.epoch)

    def complete(self, queue: bytes, job_id: bytes, token: bytes) -> bytes:
        k = queue_keys(queue)
        return self._eval("complete", [k.active, k.completed, k.metrics_completed, k.config],
                          k.prefix, job_id, token, DEFAULTS.keep_completed)

    def fail(self, queue: bytes, job_id: bytes, token: bytes, backoff_ms: int) -> bytes:
        k = queue_keys(queue)
        return self._eval("fail", [k.active, k.scheduled, k.dead, k.metrics_failed, k.config],
                          k.prefix, job_id, token, b"bench", backoff_ms,
                          DEFAULTS.max_attempts, DEFAULTS.backoff)

    def promote(self, queue: bytes, limit: int) -> bytes:
        k = queue_keys(queue)
        return self._eval("promote", [k.scheduled, k.pending, k.meta], k.prefix, limit)

    def stalled_check(self, queue: bytes, limit: int) -> bytes:
        k = queue_keys(queue)
        return self._eval("stalled", [k.active, k.pending, k.dead, k.metrics_failed],
                          k.prefix, DEFAULTS.max_stalled, limit, self.epoch)
