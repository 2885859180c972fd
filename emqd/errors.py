"""Every error reply emqd sends, defined once.

A handler raises `ReplyError`; the dispatcher turns it into a RESP error line
(`-` + message). The message's first word is the code (`ERR`, `WRONGTYPE`,
`EMQSTALE`, ...), as Redis does. Strings that Redis also sends are copied
verbatim because clients and the differential tests compare them byte for byte.
"""

from __future__ import annotations

from typing import Final


class ReplyError(Exception):
    """An error reply. `message` is the text after the leading `-`."""

    __slots__ = ("message",)

    def __init__(self, message: str | bytes) -> None:
        if isinstance(message, str):
            message = message.encode()
        super().__init__(message)
        self.message: bytes = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (ReplyError, Refusal)) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)

    def __repr__(self) -> str:
        return f"ReplyError({self.message!r})"


class Refusal:
    """An error reply's text, defined once. Call it for a fresh `ReplyError` to raise.

    Raising one shared exception instance again and again grows its
    `__traceback__` with every raise and keeps every frame it passed (and each
    frame's argv) alive: a client that keeps getting EMQSTALE would grow the
    server without bound. A `Refusal` is not an exception, so it cannot be
    raised by mistake; `raise errors.SYNTAX()` makes a new one each time. It
    compares equal to any `ReplyError` with the same text.
    """

    __slots__ = ("message",)

    def __init__(self, message: str | bytes) -> None:
        self.message: bytes = message.encode() if isinstance(message, str) else message

    def __call__(self) -> ReplyError:
        return ReplyError(self.message)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (ReplyError, Refusal)) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)

    def __repr__(self) -> str:
        return f"Refusal({self.message!r})"


class ProtocolError(Exception):
    """Broken framing: `-ERR <text>` is sent and the connection is closed."""


# --- framing: Redis 7.0's `Protocol error: ...` texts ----------------------------
PROTO_BAD_MULTIBULK_LENGTH: Final = "Protocol error: invalid multibulk length"
PROTO_BAD_BULK_LENGTH: Final = "Protocol error: invalid bulk length"
PROTO_UNAUTH_MULTIBULK_LENGTH: Final = "Protocol error: unauthenticated multibulk length"
PROTO_UNAUTH_BULK_LENGTH: Final = "Protocol error: unauthenticated bulk length"
PROTO_BIG_MBULK_COUNT: Final = "Protocol error: too big mbulk count string"
PROTO_BIG_BULK_COUNT: Final = "Protocol error: too big bulk count string"
PROTO_BIG_INLINE: Final = "Protocol error: too big inline request"
PROTO_UNBALANCED_QUOTES: Final = "Protocol error: unbalanced quotes in request"


def proto_expected_dollar(got: int) -> str:
    """Redis names the byte it found; its error replies turn CR and LF into spaces."""
    char = " " if got in (10, 13) else chr(got)
    return f"Protocol error: expected '$', got '{char}'"


# --- Redis's own texts -------------------------------------------------------
# Cluster mode (docs/CLUSTER.md): what a client gets instead of its reply when the
# cluster did not take the writes the reply tells of (the front lost the queue, or the
# cluster did not acknowledge in time), when a forwarded request's answer never came
# back, and when the cluster cannot be reached to find a queue's owner. Each: retry.
UNACKNOWLEDGED: Final = Refusal(
    "TRYAGAIN the cluster did not acknowledge the writes this reply tells of (its queue "
    "moved, or a failover); they may or may not have been applied: retry")
UNANSWERED: Final = Refusal(
    "TRYAGAIN the queue's owner front did not answer in time; the request may or may not "
    "have been applied: retry")
UNREACHABLE: Final = Refusal(
    "TRYAGAIN the cluster did not answer this front in time; retry")
WRONGTYPE: Final = Refusal("WRONGTYPE Operation against a key holding the wrong kind of value")
SYNTAX: Final = Refusal("ERR syntax error")
NOT_INTEGER: Final = Refusal("ERR value is not an integer or out of range")
NOT_FLOAT: Final = Refusal("ERR value is not a valid float")
HASH_NOT_INTEGER: Final = Refusal("ERR hash value is not an integer")
OVERFLOW: Final = Refusal("ERR increment or decrement would overflow")
NOAUTH: Final = Refusal("NOAUTH Authentication required.")
OOM: Final = Refusal("OOM command not allowed when used memory > 'maxmemory'.")
WRONGPASS: Final = Refusal("WRONGPASS invalid username-password pair or user is disabled.")
DB_OUT_OF_RANGE: Final = Refusal("ERR DB index is out of range")
NOT_INT32: Final = Refusal(
    "ERR value is out of range, value must between -2147483648 and 2147483647"
)
EXECABORT: Final = Refusal("EXECABORT Transaction discarded because of previous errors.")
MULTI_NESTED: Final = Refusal("ERR MULTI calls can not be nested")
EXEC_WITHOUT_MULTI: Final = Refusal("ERR EXEC without MULTI")
DISCARD_WITHOUT_MULTI: Final = Refusal("ERR DISCARD without MULTI")
VALUE_NOT_POSITIVE: Final = Refusal("ERR value is out of range, must be positive")
NO_SHUTDOWN_IN_PROGRESS: Final = Refusal("ERR No shutdown in progress.")
INVALID_CURSOR: Final = Refusal("ERR invalid cursor")
SCORE_NAN: Final = Refusal("ERR resulting score is not a number (NaN)")
SCORE_RANGE_NOT_FLOAT: Final = Refusal("ERR min or max is not a float")
LEX_RANGE_INVALID: Final = Refusal("ERR min or max not valid string range item")
ZADD_XX_NX: Final = Refusal("ERR XX and NX options at the same time are not compatible")
ZADD_GT_LT_NX: Final = Refusal("ERR GT, LT, and/or NX options at the same time are not compatible")
ZADD_INCR_PAIRS: Final = Refusal("ERR INCR option supports a single increment-element pair")
ZRANGE_LIMIT_RANK: Final = Refusal(
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
)
ZRANGE_WITHSCORES_LEX: Final = Refusal(
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
)
WEIGHT_NOT_FLOAT: Final = Refusal("ERR weight value is not a float")
LIMIT_NEGATIVE: Final = Refusal("ERR LIMIT can't be negative")
NUMKEYS_NOT_POSITIVE: Final = Refusal("ERR numkeys should be greater than 0")
COUNT_NOT_POSITIVE: Final = Refusal("ERR count should be greater than 0")
TIMEOUT_NOT_FLOAT: Final = Refusal("ERR timeout is not a float or out of range")
TIMEOUT_NEGATIVE: Final = Refusal("ERR timeout is negative")
OUT_OF_RANGE: Final = Refusal("ERR value is out of range")
COUNT_RANGE: Final = Refusal(
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
)
INCR_NAN_OR_INF: Final = Refusal("ERR value is NaN or Infinity")
INCR_WOULD_BE_NAN_OR_INF: Final = Refusal("ERR increment would produce NaN or Infinity")
HASH_NOT_FLOAT: Final = Refusal("ERR hash value is not a float")


def no_input_key(name: str) -> ReplyError:
    """ZUNION and its family given numkeys 0 (Redis names the command in lower case)."""
    return ReplyError(f"ERR at least 1 input key is needed for '{name}' command")


def no_expiry(name: str) -> ReplyError:
    """EXPIRE and its family: keys in emqd never expire (docs/SERVER.md says why)."""
    return ReplyError(f"ERR keys do not expire in emqd: {name.upper()} is not supported")


def exec_abort(error: ReplyError) -> ReplyError:
    """EXEC refused before it runs: Redis quotes the error, without an `ERR ` code."""
    text = error.message[4:] if error.message.startswith(b"ERR ") else error.message
    return ReplyError(b"EXECABORT Transaction discarded because of: " + text)


def wrong_arity(name: str) -> ReplyError:
    """Redis 7.0's text; `name` is the command's full name (`client|setname`)."""
    return ReplyError(f"ERR wrong number of arguments for '{name}' command")


def unknown_command(argv: list[bytes]) -> ReplyError:
    """Redis 7.0's text: the name and the first arguments, 128 bytes each at most.

    Redis formats them with `%.128s`, so each stops at a NUL byte; its error
    replies carry no CR or LF (they become spaces).
    """
    args = b""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + c_string(arg)[: 128 - len(args)] + b"' "
    name = c_string(argv[0])[:128]
    text = b"ERR unknown command '" + name + b"', with args beginning with: " + args
    return ReplyError(_one_line(text))


def c_string(value: bytes) -> bytes:
    """The text Redis's C code sees in an argument: up to its first NUL byte."""
    end = value.find(b"\0")
    return value if end < 0 else value[:end]


def _one_line(text: bytes) -> bytes:
    return text.replace(b"\r", b" ").replace(b"\n", b" ")


def unknown_subcommand(sub: bytes, container: str) -> ReplyError:
    """Redis 7.0: `ERR unknown subcommand 'x'. Try CLIENT HELP.`"""
    text = b"ERR unknown subcommand '" + c_string(sub)[:128] + b"'. Try "
    return ReplyError(_one_line(text + container.upper().encode() + b" HELP."))


MAX_CLIENTS: Final = Refusal("ERR max number of clients reached")
NOT_IN_MULTI: Final = Refusal("ERR Command not allowed inside a transaction")
BAD_CLIENT_NAME: Final = Refusal(
    "ERR Client names cannot contain spaces, newlines or special characters."
)
AUTH_NOT_CONFIGURED: Final = Refusal(
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
HELLO_NOAUTH: Final = Refusal(
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
    "HELLO AUTH <user> <pass> option can be used to authenticate the client and "
    "select the RESP protocol version at the same time"
)
INVALID_CLIENT_ID: Final = Refusal("ERR Invalid client ID")
NOPROTO: Final = Refusal("NOPROTO unsupported protocol version")
BAD_PROTOCOL_VERSION: Final = Refusal("ERR Protocol version is not an integer or out of range")


def subscribed_mode(name: str) -> ReplyError:
    """A RESP2 client that listens may only (un)subscribe, PING, QUIT or RESET.

    Redis 7.0's text, which also names the sharded (S) variants emqd has not.
    """
    return ReplyError(
        f"ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        "RESET are allowed in this context"
    )


def unknown_client_type(name: bytes) -> ReplyError:
    return ReplyError(_one_line(b"ERR Unknown client type '" + c_string(name) + b"'"))


def hello_syntax(option: bytes) -> ReplyError:
    return ReplyError(_one_line(b"ERR Syntax error in HELLO option '" + c_string(option) + b"'"))


# --- emqd's own ----------------------------------------------------------------
STALE_GONE: Final = Refusal("EMQSTALE job gone")
STALE_TOKEN: Final = Refusal("EMQSTALE token mismatch")
STALE_NOT_ACTIVE: Final = Refusal("EMQSTALE job not active")
STATE_NOT_DEAD: Final = Refusal("EMQSTATE job is not dead")
STATE_ACTIVE: Final = Refusal("EMQSTATE job is active")
# The holder of a job that EMQ.CANCEL ended (protocol section 22.2): a code of its own, so
# that a worker tells "stop, the job was cancelled" from "someone else holds it" (EMQSTALE).
CANCELLED: Final = Refusal("EMQCANCELLED job was cancelled")
INVALID_QUEUE: Final = Refusal("ERR invalid queue name")
INVALID_ID: Final = Refusal("ERR invalid job id")
INVALID_GROUP: Final = Refusal("ERR invalid group name")
INVALID_BACKOFF: Final = Refusal("ERR invalid backoff rule")
PRIORITY_RANGE: Final = Refusal("ERR PRIORITY must be between -1000 and 1000")
PRIORITY_NOT_INTEGER: Final = Refusal("ERR PRIORITY must be an integer")
INVALID_CHILD_POLICY: Final = Refusal("ERR ONCHILDFAIL must be fail, ignore or remove")
FLOW_UNDER: Final = Refusal("ERR UNDER must name the parent (0) or an earlier CHILD of the flow")
FLOW_PARENT_DELAY: Final = Refusal(
    "ERR a job with children cannot have DELAY or AT: it runs when they are done"
)
FLOW_POLICY_WITHOUT_CHILDREN: Final = Refusal("ERR ONCHILDFAIL is for a job with children")
FLOW_SAME_ID: Final = Refusal("ERR a flow names the same job twice")
STATE_DEAD_OF_CHILD: Final = Refusal(
    "EMQSTATE job died of a child: revive the child, or remove it to go on without it"
)
INVALID_SCHEDULE: Final = Refusal("ERR invalid schedule name")
INVALID_UNIQUE_KEY: Final = Refusal("ERR invalid unique key")
INVALID_WORKER: Final = Refusal("ERR invalid worker name")  # EMQ.WORKER, EMQ.BEAT
TIMEOUT_RANGE: Final = Refusal("ERR timeout is out of range")  # Redis's text for BLPOP's
PAYLOAD_TOO_BIG: Final = Refusal("ERR payload exceeds max-payload")
NO_SUCH_JOB: Final = Refusal("ERR no such job")  # EMQ.WAIT, EMQ.LOGS: no row for the id
CORRUPT_JOB_LOG: Final = Refusal("ERR job log holds an invalid line number")
CORRUPT_HISTORY: Final = Refusal("ERR queue history holds an invalid record")  # EMQ.METRICS
AOF_DISABLED: Final = Refusal("ERR persistence is off (emqd was started with --appendonly no)")
REWRITE_IN_PROGRESS: Final = Refusal(
    "ERR Background append only file rewriting already in progress")
REWRITE_FAILED: Final = Refusal(
    "ERR Background append only file rewriting could not start; see the log"
)


def invalid_time(keyword: str, command: str) -> ReplyError:
    """A time whose deadline (now + it, or AT itself) is beyond numbers.MAX_TIME_MS (2^53
    ms), the last a score holds exactly: Redis's `invalid expire time in 'set' command`,
    naming the argument."""
    return ReplyError(f"ERR invalid {keyword} in '{command}' command")


def misconf(error: OSError) -> ReplyError:
    """Redis 7.0's refusal of a write while the append-only file cannot be written."""
    reason = error.strerror or str(error)
    return ReplyError(_one_line(b"MISCONF Errors writing to the AOF file: " + reason.encode()))


def save_failed(error: OSError | None) -> ReplyError:
    """SAVE when the log could not be written or fsynced: nothing is promised."""
    reason = "see the log" if error is None else (error.strerror or str(error))
    return ReplyError(_one_line(b"ERR the append only file could not be saved: "
                                + reason.encode()))


def must_be_positive(keyword: str) -> Refusal:
    return Refusal(f"ERR {keyword} must be a positive integer")


def must_be_non_negative(keyword: str) -> Refusal:
    return Refusal(f"ERR {keyword} must be a non-negative integer")


def too_long(keyword: str, limit: int) -> Refusal:
    """An argument over its size limit (EMQ.PROGRESS's VALUE, EMQ.LOG's LINE)."""
    return Refusal(f"ERR {keyword} exceeds {limit} bytes")


def over_max_payload(keyword: str) -> Refusal:
    """A value a job keeps (COMPLETE's RESULT, FAIL's ERROR) over `--max-payload`, as ADD's
    payload is refused (PAYLOAD_TOO_BIG)."""
    return Refusal(f"ERR {keyword} exceeds max-payload")


def corrupt_setting(field: bytes) -> ReplyError:
    """A queue setting that a plain HSET made unreadable: the verb is refused."""
    return ReplyError(b"ERR queue setting '" + field + b"' holds an invalid value")


def corrupt_job_field(field: bytes) -> ReplyError:
    """A job row's own setting (`priority`, `max_attempts`, `backoff`) that a plain
    HSET made unreadable: the verb that depends on it is refused, nothing written."""
    return ReplyError(b"ERR job field '" + field + b"' holds an invalid value")


def cancelled(reason: bytes | None) -> ReplyError:
    """What a cancelled job's holder is answered: CANCELLED, and the canceller's REASON."""
    if not reason:
        return CANCELLED()
    return ReplyError(_one_line(CANCELLED.message + b": " + reason))


def state_is(state: bytes) -> ReplyError:
    """A verb that needs a live job met a finished one (`EMQSTATE job is completed`)."""
    return ReplyError(_one_line(b"EMQSTATE job is " + state))


def job_exists(queue: bytes, job_id: bytes) -> ReplyError:
    """A flow's child names an id that a job of its queue already has."""
    return ReplyError(_one_line(b"EMQSTATE job '" + job_id + b"' already exists in queue '"
                                + queue + b"'"))


def invalid_cron(reason: str) -> ReplyError:
    """A cron expression the library refuses, with the library's own reason."""
    return ReplyError(_one_line(b"ERR invalid cron expression: " + reason.encode()))


def invalid_zone(zone: bytes) -> ReplyError:
    return ReplyError(_one_line(b"ERR invalid time zone '" + c_string(zone) + b"'"))


def corrupt_schedule(name: bytes) -> ReplyError:
    """A schedule's hash that a plain HSET made unreadable."""
    return ReplyError(_one_line(b"ERR schedule '" + name + b"' holds an invalid value"))


def corrupt_rate(what: bytes) -> ReplyError:
    """A rate limit that a plain HSET made unreadable (the queue's, or a lane's)."""
    return ReplyError(_one_line(b"ERR rate limit of " + what + b" holds an invalid value"))


def corrupt_lane_limit(group: bytes) -> ReplyError:
    """A lane's own limit in `glimit` that a plain HSET made unreadable."""
    return ReplyError(b"ERR lane limit of '" + group + b"' holds an invalid value")


def unknown_field(field: bytes) -> ReplyError:
    return ReplyError(b"ERR unknown field '" + field + b"'")


# --- OBJECT, as Redis 7.0 with its default maxmemory-policy answers it -----------
FREQ_NOT_TRACKED: Final = Refusal(
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time to "
    "adjust."
)
# emqd's own: Redis tracks idle time under its default policy, emqd keeps no access times.
IDLETIME_NOT_TRACKED: Final = Refusal(
    "ERR emqd keeps no access times (it evicts nothing), idle time not tracked."
)


# --- CONFIG, Redis 7.0's texts -------------------------------------------------------
NO_CONFIG_FILE: Final = Refusal("ERR The server is running without a config file")


def unknown_config_option(name: bytes) -> ReplyError:
    """CONFIG SET of a name emqd does not know, as typed."""
    return ReplyError(_one_line(
        b"ERR Unknown option or number of arguments for CONFIG SET - '" + c_string(name) + b"'"))


def config_set_failed(name: bytes, reason: str) -> ReplyError:
    """CONFIG SET refused because of one parameter (as typed, or its lower-case name)."""
    return ReplyError(_one_line(b"ERR CONFIG SET failed (possibly related to argument '"
                                + c_string(name) + b"') - " + reason.encode()))


# --- FUNCTION and FCALL, as a Redis 7.0 with no functions answers them ----------
LIBRARY_NOT_FOUND: Final = Refusal("ERR Library not found")
FUNCTION_NOT_FOUND: Final = Refusal("ERR Function not found")
NOTBUSY: Final = Refusal("NOTBUSY No scripts in execution right now.")
FLUSH_MODE: Final = Refusal("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
LIBRARY_NAME_MISSING: Final = Refusal("ERR library name argument was not given")
RESTORE_POLICY: Final = Refusal(
    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
)
DUMP_PAYLOAD: Final = Refusal("ERR DUMP payload version or checksum are wrong")
LIBRARY_METADATA_MISSING: Final = Refusal("ERR Missing library metadata")
NO_FUNCTIONS: Final = Refusal(
    "ERR emqd does not run functions: a library cannot be loaded or restored")


def unknown_argument(arg: bytes) -> ReplyError:
    return ReplyError(_one_line(b"ERR Unknown argument " + c_string(arg)))


def unknown_option_given(arg: bytes) -> ReplyError:
    return ReplyError(_one_line(b"ERR Unknown option given: " + c_string(arg)))


def subcommand_syntax(sub: bytes, container: str) -> ReplyError:
    """Redis's addReplySubcommandSyntaxError: the subcommand as typed, the container upper."""
    text = (b"ERR unknown subcommand or wrong number of arguments for '" + c_string(sub)[:128]
            + b"'. Try " + container.upper().encode() + b" HELP.")
    return ReplyError(_one_line(text))
