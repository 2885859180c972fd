"""COMMAND DOCS `arguments`: every command's arguments, as Redis describes its own.

redis-cli (7.2 and later) and IDEs build their argument hints from COMMAND
DOCS, so each command and subcommand that takes arguments is listed here,
with Redis's names, types, tokens and flags. The plain Redis commands' lists
are Redis 7.0's (tests/commands/test_docs.py compares them byte for byte with
a redis-server), except where emqd accepts less (`COMMAND LIST FILTERBY`
takes PATTERN only). For the EMQ verbs this table is the one source of their
syntax: the heading of each verb in docs/PROTOCOL.md section 5 and the first
lines of its module's docstring are its entry rendered (tests/syntax.py, as
redis.io renders Redis's), the Python client's argv must match it, and the
verb's parser must take that argv and know no keyword it leaves out
(tests/commands/test_docs_copies.py, tests/client/test_commands_syntax.py).
This table lives apart from the command rows so that a verb's module stays its
parser and planner, and the hints can grow without touching it.

Each builder returns one argument as the map Redis replies with, its fields
in Redis's order (name, type, key_spec_index, token, since, flags, arguments).
"""

from __future__ import annotations

from typing import Any

from emqd.reply import Set

_FLAG_NAMES = ("optional", "multiple", "multiple_token")


def _arg(name: str, kind: str, *, token: str | None = None, since: str | None = None,
         key_spec: int | None = None, arguments: tuple[dict[Any, Any], ...] = (),
         optional: bool = False, multiple: bool = False,
         multiple_token: bool = False) -> dict[bytes, Any]:
    spec: dict[bytes, Any] = {b"name": name.encode(), b"type": kind.encode()}
    if key_spec is not None:
        spec[b"key_spec_index"] = key_spec
    if token is not None:
        spec[b"token"] = token.encode()
    if since is not None:
        spec[b"since"] = since.encode()
    flags = [flag for flag, on in zip(_FLAG_NAMES, (optional, multiple, multiple_token),
                                      strict=True) if on]
    if flags:
        spec[b"flags"] = Set(flags)
    if kind in ("oneof", "block"):
        spec[b"arguments"] = list(arguments)
    return spec


def key(name: str = "key", spec: int = 0, **options: Any) -> dict[bytes, Any]:
    """A key; `spec` is its index in COMMAND INFO's key specs (one spec: 0)."""
    return _arg(name, "key", key_spec=spec, **options)


def string(name: str, **options: Any) -> dict[bytes, Any]:
    return _arg(name, "string", **options)


def integer(name: str, **options: Any) -> dict[bytes, Any]:
    return _arg(name, "integer", **options)


def double(name: str, **options: Any) -> dict[bytes, Any]:
    return _arg(name, "double", **options)


def unix_time(name: str, **options: Any) -> dict[bytes, Any]:
    return _arg(name, "unix-time", **options)


def pattern(name: str, **options: Any) -> dict[bytes, Any]:
    return _arg(name, "pattern", **options)


def pure(name: str, token: str | None = None, **options: Any) -> dict[bytes, Any]:
    """A word that stands alone (`WITHSCORES`); its token is its name in capitals."""
    return _arg(name, "pure-token", token=token or name.upper(), **options)


def oneof(name: str, *choices: dict[bytes, Any], **options: Any) -> dict[bytes, Any]:
    return _arg(name, "oneof", arguments=choices, **options)


def block(name: str, *parts: dict[bytes, Any], **options: Any) -> dict[bytes, Any]:
    return _arg(name, "block", arguments=parts, **options)


_QUEUE = key("queue")
_ID = string("id")
_JOB_OPTIONS = [  # EMQ.ADD's, and each job's of EMQ.FLOW
    string("id", token="ID", optional=True),
    oneof("when", integer("delay-ms", token="DELAY"), integer("unix-time-ms", token="AT"),
          optional=True),
    integer("priority", token="PRIORITY", optional=True),
    integer("max-attempts", token="MAXATTEMPTS", optional=True),
    string("backoff-rule", token="BACKOFF", optional=True),
    string("group", token="GROUP", optional=True),
    string("trace-context", token="TRACE", optional=True),
]
_ON_CHILD_FAIL = oneof("on-child-fail", pure("fail"), pure("ignore"), pure("remove"),
                       token="ONCHILDFAIL", optional=True)
_TOKEN = string("token")
_AGGREGATE = oneof("aggregate", pure("sum"), pure("min"), pure("max"), token="AGGREGATE",
                   optional=True)
_WEIGHTS = integer("weight", token="WEIGHTS", optional=True, multiple=True)
_WHERE = oneof("where", pure("min"), pure("max"))
_EXPIRY_CONDITION = oneof("condition", pure("nx"), pure("xx"), pure("gt"), pure("lt"),
                          since="7.0.0", optional=True)

# Full command name (`client|list` for a subcommand) -> its arguments. A
# command that takes none has no entry, and its DOCS no `arguments`, as in Redis.
ARGUMENTS: dict[str, list[dict[bytes, Any]]] = {
    "ping": [string("message", optional=True)],
    "echo": [string("message")],
    "select": [integer("index")],
    "auth": [string("username", since="6.0.0", optional=True), string("password")],
    "hello": [
        block("arguments", integer("protover"),
              block("username_password", string("username"), string("password"), token="AUTH",
                    optional=True),
              string("clientname", token="SETNAME", optional=True), optional=True),
    ],
    "client|setname": [string("connection-name")],
    "client|setinfo": [  # Redis 7.2's
        oneof("attr", string("libname", token="LIB-NAME"), string("libver", token="LIB-VER")),
    ],
    "client|list": [
        oneof("normal_master_replica_pubsub", pure("normal"), pure("master"), pure("replica"),
              pure("pubsub"), token="TYPE", since="5.0.0", optional=True),
        block("id", integer("client-id", multiple=True), token="ID", since="6.2.0", optional=True),
    ],
    "del": [key(multiple=True)],
    "unlink": [key(multiple=True)],
    "exists": [key(multiple=True)],
    "type": [key()],
    "touch": [key(multiple=True)],
    "ttl": [key()],
    "pttl": [key()],
    "expiretime": [key()],
    "pexpiretime": [key()],
    "persist": [key()],
    "expire": [key(), integer("seconds"), _EXPIRY_CONDITION],
    "pexpire": [key(), integer("milliseconds"), _EXPIRY_CONDITION],
    "expireat": [key(), unix_time("unix-time-seconds"), _EXPIRY_CONDITION],
    "pexpireat": [key(), unix_time("unix-time-milliseconds"), _EXPIRY_CONDITION],
    "object|encoding": [key()],
    "memory|usage": [key(), integer("count", token="SAMPLES", optional=True)],
    "object|freq": [key()],
    "object|idletime": [key()],
    "object|refcount": [key()],
    "keys": [pattern("pattern")],
    "scan": [
        integer("cursor"),
        pattern("pattern", token="MATCH", optional=True),
        integer("count", token="COUNT", optional=True),
        string("type", token="TYPE", since="6.0.0", optional=True),
    ],
    "flushdb": [
        oneof("async", pure("async", since="4.0.0"), pure("sync", since="6.2.0"), optional=True),
    ],
    "flushall": [
        oneof("async", pure("async", since="4.0.0"), pure("sync", since="6.2.0"), optional=True),
    ],
    "hset": [key(), block("field_value", string("field"), string("value"), multiple=True)],
    "hsetnx": [key(), string("field"), string("value")],
    "hmset": [key(), block("field_value", string("field"), string("value"), multiple=True)],
    "hget": [key(), string("field")],
    "hmget": [key(), string("field", multiple=True)],
    "hgetall": [key()],
    "hdel": [key(), string("field", multiple=True)],
    "hexists": [key(), string("field")],
    "hlen": [key()],
    "hkeys": [key()],
    "hvals": [key()],
    "hincrby": [key(), string("field"), integer("increment")],
    "hincrbyfloat": [key(), string("field"), double("increment")],
    "hrandfield": [
        key(),
        block("options", integer("count"), pure("withvalues", optional=True), optional=True),
    ],
    "hstrlen": [key(), string("field")],
    "hscan": [
        key(),
        integer("cursor"),
        pattern("pattern", token="MATCH", optional=True),
        integer("count", token="COUNT", optional=True),
    ],
    "zadd": [
        key(),
        oneof("condition", pure("nx"), pure("xx"), since="3.0.2", optional=True),
        oneof("comparison", pure("gt"), pure("lt"), since="6.2.0", optional=True),
        pure("change", token="CH", since="3.0.2", optional=True),
        pure("increment", token="INCR", since="3.0.2", optional=True),
        block("score_member", double("score"), string("member"), multiple=True),
    ],
    "zincrby": [key(), integer("increment"), string("member")],
    "zrem": [key(), string("member", multiple=True)],
    "zscore": [key(), string("member")],
    "zmscore": [key(), string("member", multiple=True)],
    "zcard": [key()],
    "zcount": [key(), double("min"), double("max")],
    "zlexcount": [key(), string("min"), string("max")],
    "zrank": [key(), string("member")],
    "zrevrank": [key(), string("member")],
    "zrange": [
        key(),
        string("start"),
        string("stop"),
        oneof("sortby", pure("byscore"), pure("bylex"), since="6.2.0", optional=True),
        pure("rev", since="6.2.0", optional=True),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT", since="6.2.0",
              optional=True),
        pure("withscores", optional=True),
    ],
    "zrangebyscore": [
        key(),
        double("min"),
        double("max"),
        pure("withscores", since="2.0.0", optional=True),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT", optional=True),
    ],
    "zrevrange": [key(), integer("start"), integer("stop"), pure("withscores", optional=True)],
    "zrevrangebyscore": [
        key(),
        double("max"),
        double("min"),
        pure("withscores", optional=True),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT", optional=True),
    ],
    "zrangebylex": [
        key(),
        string("min"),
        string("max"),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT", optional=True),
    ],
    "zrevrangebylex": [
        key(),
        string("max"),
        string("min"),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT", optional=True),
    ],
    "zpopmin": [key(), integer("count", optional=True)],
    "zpopmax": [key(), integer("count", optional=True)],
    "zremrangebyscore": [key(), double("min"), double("max")],
    "zremrangebyrank": [key(), integer("start"), integer("stop")],
    "zscan": [
        key(),
        integer("cursor"),
        pattern("pattern", token="MATCH", optional=True),
        integer("count", token="COUNT", optional=True),
    ],
    "zremrangebylex": [key(), string("min"), string("max")],
    "zrangestore": [
        key("dst"),
        key("src", spec=1),
        string("min"),
        string("max"),
        oneof("sortby", pure("byscore"), pure("bylex"), optional=True),
        pure("rev", optional=True),
        block("offset_count", integer("offset"), integer("count"), token="LIMIT",
              optional=True),
    ],
    "zunion": [integer("numkeys"), key(multiple=True), _WEIGHTS, _AGGREGATE,
               pure("withscores", optional=True)],
    "zinter": [integer("numkeys"), key(multiple=True), _WEIGHTS, _AGGREGATE,
               pure("withscores", optional=True)],
    "zdiff": [integer("numkeys"), key(multiple=True), pure("withscores", optional=True)],
    "zunionstore": [key("destination"), integer("numkeys"), key(spec=1, multiple=True),
                    _WEIGHTS, _AGGREGATE],
    "zinterstore": [key("destination"), integer("numkeys"), key(spec=1, multiple=True),
                    _WEIGHTS, _AGGREGATE],
    "zdiffstore": [key("destination"), integer("numkeys"), key(spec=1, multiple=True)],
    "zintercard": [integer("numkeys"), key(multiple=True),
                   integer("limit", token="LIMIT", optional=True)],
    "zmpop": [integer("numkeys"), key(multiple=True), _WHERE,
              integer("count", token="COUNT", optional=True)],
    "bzmpop": [double("timeout"), integer("numkeys"), key(multiple=True), _WHERE,
               integer("count", token="COUNT", optional=True)],
    "bzpopmin": [key(multiple=True), double("timeout")],
    "bzpopmax": [key(multiple=True), double("timeout")],
    "zrandmember": [
        key(),
        block("options", integer("count"), pure("withscores", optional=True), optional=True),
    ],
    "subscribe": [string("channel", multiple=True)],
    "unsubscribe": [string("channel", optional=True, multiple=True)],
    "psubscribe": [block("pattern", pattern("pattern"), multiple=True)],
    "punsubscribe": [pattern("pattern", optional=True, multiple=True)],
    "publish": [string("channel"), string("message")],
    "pubsub|channels": [pattern("pattern", optional=True)],
    "pubsub|numsub": [string("channel", optional=True, multiple=True)],
    "command|list": [
        oneof("filterby", pattern("pattern", token="PATTERN"), token="FILTERBY", optional=True),
    ],
    "command|info": [string("command-name", optional=True, multiple=True)],
    "command|docs": [string("command-name", optional=True, multiple=True)],
    "info": [string("section", optional=True, multiple=True)],
    "config|get": [block("parameter", string("parameter"), multiple=True)],
    "config|set": [block("parameter_value", string("parameter"), string("value"),
                         multiple=True)],
    "shutdown": [
        oneof("nosave_save", pure("nosave"), pure("save"), optional=True),
        pure("now", since="7.0.0", optional=True),
        pure("force", since="7.0.0", optional=True),
        pure("abort", since="7.0.0", optional=True),
    ],
    "function|load": [pure("replace", optional=True), string("function-code")],
    "function|restore": [
        string("serialized-value"),
        oneof("policy", pure("flush"), pure("append"), pure("replace"), optional=True),
    ],
    "function|flush": [oneof("async", pure("async"), pure("sync"), optional=True)],
    "function|delete": [string("library-name")],
    "function|list": [
        string("library-name-pattern", token="LIBRARYNAME", optional=True),
        pure("withcode", optional=True),
    ],
    "fcall": [
        string("function"),
        integer("numkeys"),
        key(optional=True, multiple=True),
        string("arg", optional=True, multiple=True),
    ],
    "fcall_ro": [
        string("function"),
        integer("numkeys"),
        key(optional=True, multiple=True),
        string("arg", optional=True, multiple=True),
    ],
    # The EMQ verbs: the source of their syntax (docs/PROTOCOL.md section 5 renders it).
    "emq.add": [
        _QUEUE, string("payload"), *_JOB_OPTIONS,
        block("unique", string("key", token="UNIQUE"),
              integer("ttl-ms", token="TTL", optional=True), pure("replace", optional=True),
              pure("extend", optional=True), optional=True),
    ],
    "emq.flow": [
        _QUEUE, string("payload"), *_JOB_OPTIONS, _ON_CHILD_FAIL,
        block("child", string("child-queue", token="CHILD"), string("child-payload"),
              *_JOB_OPTIONS, _ON_CHILD_FAIL, integer("under", token="UNDER", optional=True),
              multiple=True),
    ],
    "emq.children": [_QUEUE, _ID],
    "emq.repeat": [
        _QUEUE, string("name"),
        oneof("rule", integer("every-ms", token="EVERY"),
              block("cron", string("expression", token="CRON"),
                    string("zone", token="TZ", optional=True))),
        string("payload"),
        integer("priority", token="PRIORITY", optional=True),
        integer("max-attempts", token="MAXATTEMPTS", optional=True),
        string("backoff-rule", token="BACKOFF", optional=True),
        string("group", token="GROUP", optional=True),
    ],
    "emq.repeat.del": [_QUEUE, string("name")],
    "emq.repeats": [_QUEUE],
    "emq.rate": [_QUEUE, oneof("limit", block("window", integer("max"), integer("per-ms")),
                               pure("off"))],
    "emq.lane.rate": [_QUEUE, string("group"),
                      oneof("limit", block("window", integer("max"), integer("per-ms")),
                            pure("off"))],
    "emq.claim": [
        _QUEUE, integer("lease-ms"), integer("count", token="COUNT", optional=True),
        integer("block-ms", token="BLOCK", optional=True), pure("withtrace", optional=True),
    ],
    "emq.complete": [_QUEUE, _ID, _TOKEN, string("result", token="RESULT", optional=True)],
    "emq.fail": [
        _QUEUE, _ID, _TOKEN, string("error", token="ERROR", optional=True),
        integer("max-attempts", token="MAXATTEMPTS", optional=True),
        integer("backoff-ms", token="BACKOFF", optional=True),
    ],
    "emq.requeue": [_QUEUE, _ID, _TOKEN, integer("delay-ms", token="DELAY", optional=True)],
    "emq.extend": [_QUEUE, _ID, _TOKEN, integer("lease-ms")],
    "emq.progress": [_QUEUE, _ID, _TOKEN, string("value")],
    "emq.log": [_QUEUE, _ID, _TOKEN, string("line")],
    "emq.logs": [
        _QUEUE, _ID, integer("start", token="START", optional=True),
        integer("count", token="COUNT", optional=True),
    ],
    "emq.wait": [_QUEUE, _ID, integer("timeout-ms")],
    "emq.stalled.check": [
        _QUEUE, integer("max-stalled", token="MAXSTALLED", optional=True),
        integer("limit", token="LIMIT", optional=True),
    ],
    "emq.promote": [_QUEUE, oneof("which", integer("limit", token="LIMIT"),
                                  string("id", token="ID"), optional=True)],
    "emq.revive": [_QUEUE, _ID, pure("reset", optional=True)],
    "emq.remove": [_QUEUE, _ID],
    "emq.cancel": [_QUEUE, _ID, string("reason", token="REASON", optional=True)],
    "emq.worker": [_QUEUE, oneof("order", pure("quiet"), pure("stop"), pure("run")),
                   string("name")],
    "emq.beat": [_QUEUE, string("name")],
    "emq.metrics": [_QUEUE, integer("from-ms", token="FROM", optional=True),
                    integer("to-ms", token="TO", optional=True)],
    "emq.get": [_QUEUE, _ID],
    "emq.owner": [_QUEUE],
    "emq.front": [oneof("form", pure("challenge"),
                        block("front", string("address"),
                              string("proof", token="PROOF", optional=True)))],
    "emq.stats": [_QUEUE],
    "emq.pause": [_QUEUE],
    "emq.resume": [_QUEUE],
    "emq.lanes": [_QUEUE],
    "emq.lane.limit": [_QUEUE, string("group"), integer("limit")],
    "emq.config": [
        _QUEUE,
        oneof("action",
              block("get", pure("get"), string("field", optional=True)),
              block("set", pure("set"),
                    block("field_value", string("field"), string("value"), multiple=True))),
    ],
}
