"""Every EMQ verb the client sends is one its COMMAND DOCS arguments describe (in their
order: the order PROTOCOL.md's headings show), and one the verb's own parser takes.

The client's methods build argv in emqd/client/commands.py (QueueCommands; `Queue`,
`SyncQueue` and the Worker only drive them). Each method is called here with its options
drawn at random, with no socket: the operation's batches are its argv, encoded as
redis-py encodes them for the wire. Explicit calls exercise every option of every
method, and the tokens they send, with those the client never sends, must be every token
of the verb's table: a new option in the table, or in the client, is seen here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.client.commands import Child, Command, Job, NewJob, QueueCommands
from emqd.client.routes import Routes
from emqd.commands.docs import ARGUMENTS
from emqd.config import Config
from emqd.errors import ReplyError
from emqd.rules.settings import FIELDS
from tests.syntax import VERB_MODULES, matches, render, tokens

ENCODER = redis.Redis().get_encoder()  # what a Queue's connection sends: no connection made
SENDS_NO_VERB = {"ping": "PING", "add_command": "builds add's command, sends nothing"}
NOT_SENT_BY_THE_CLIENT = {
    "emq.promote": {b"ID"},  # the dashboard's "run it now"
}
# housekeeping's; INFO shows the epoch; the cluster's fronts (docs/CLUSTER.md: the
# client asks EMQ.FRONTS and EMQ.OWNER to learn where a queue is, emqd/client/routes.py)
NO_CLIENT_METHOD = {"emq.epoch", "emq.stalled.check", "emq.owner", "emq.front", "emq.fronts"}


@dataclass(frozen=True)
class Call:
    """A QueueCommands method call; `replies` answer the round trips before its last."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    replies: tuple[list[Any], ...] = ()
    queue: str | bytes = "mail"

    def sent(self) -> list[list[bytes]]:
        """Every command the call sends, as the bytes on the wire."""
        operation = getattr(QueueCommands(self.queue), self.method)(*self.args, **self.kwargs)
        commands: list[Command] = []
        try:
            commands += next(operation)
            for replies in self.replies:
                commands += operation.send(replies)
        except StopIteration:
            pass  # done without a round trip (add_many of no jobs)
        operation.close()
        return [[bytes(ENCODER.encode(word)) for word in command] for command in commands]


def check(argv: list[bytes]) -> None:
    """An EMQ verb's argv matches its table entry and its parser takes it."""
    name = argv[0].decode().lower()
    if not name.startswith("emq."):
        return
    arguments = ARGUMENTS.get(name, [])
    assert matches(argv[1:], arguments), f"{argv!r} is not {render(name, arguments)}"
    try:
        VERB_MODULES[name].parse(argv, Config())
    except ReplyError as refusal:
        pytest.fail(f"{argv!r}: the parser refuses it: {refusal}")


JOB = Job("17", b"payload", "3")
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
RULES = ["0", "500", "fixed:1000", "exp:100", "exp:100:60000", 250]



def shown(raw: st.SearchStrategy[bytes]) -> st.SearchStrategy[str]:
    """Names and ids as the client shows them: any bytes, as `str` (surrogateescape)."""
    return raw.map(lambda word: word.decode("utf-8", "surrogateescape"))


raw_names = st.binary(min_size=1, max_size=12).filter(lambda raw: not {*b"{}"} & {*raw})
names = raw_names | shown(raw_names)
ids = shown(st.binary(min_size=1, max_size=12))
payloads = st.binary(max_size=24) | st.text(max_size=12)
json_values = st.text(max_size=12) | st.integers() | st.dictionaries(st.text(max_size=4),
                                                                     st.integers(), max_size=3)
anything = payloads | json_values
positive = st.integers(1, 10**9)
non_negative = st.integers(0, 10**9)
job_options: dict[str, st.SearchStrategy[Any]] = {
    "id": ids, "priority": st.integers(-1000, 1000), "max_attempts": positive,
    "backoff": st.sampled_from(RULES), "group": names,
}
when = st.one_of(st.just({}), st.fixed_dictionaries({"delay_ms": non_negative}),
                 st.fixed_dictionaries({"at_ms": st.integers(0, 2**53)}))
add_options = st.tuples(when, st.fixed_dictionaries({}, optional=job_options)).map(
    lambda parts: {**parts[0], **parts[1]})
settings_values = {name.decode(): st.sampled_from(RULES[1:4]) if name == b"backoff" else positive
                   for name in FIELDS}


def call(method: str, *args: st.SearchStrategy[Any], replies: tuple[list[Any], ...] = (),
         **options: st.SearchStrategy[Any]) -> st.SearchStrategy[Call]:
    """Calls of `method`: positional arguments drawn from `args`, each option in or out."""
    return st.builds(lambda a, k, q: Call(method, a, k, replies, q), st.tuples(*args),
                     st.fixed_dictionaries({}, optional=options), names)


@st.composite
def flows(draw: st.DrawFn) -> Call:
    """A flow the parser takes: children under the parent or an earlier child, explicit ids
    unique, ONCHILDFAIL only on a job with children, DELAY / AT only on one without."""
    count = draw(st.integers(1, 4))
    unders = [draw(st.integers(0, k)) for k in range(count)]  # child k+1 under 0..k
    has_children = {0, *unders}

    def options(k: int) -> dict[str, Any]:
        chosen = draw(st.fixed_dictionaries({}, optional=job_options)) | (
            {} if k in has_children else draw(when))
        if "id" in chosen:
            chosen["id"] = f"job-{k}"
        if k in has_children and draw(st.booleans()):
            chosen["on_child_fail"] = draw(st.sampled_from(["fail", "ignore", "remove"]))
        return chosen

    children = [Child(draw(names), draw(anything), under=unders[k], **options(k + 1))
                for k in range(count)]
    return Call("flow", (draw(anything), children), options(0), queue=draw(names))


@st.composite
def repeats(draw: st.DrawFn) -> Call:
    rule = draw(st.one_of(
        st.fixed_dictionaries({"every_ms": positive}),
        st.fixed_dictionaries({"cron": st.sampled_from(["*/5 * * * *", "0 8 * * 1", "@hourly"])},
                              optional={"tz": st.sampled_from(["UTC", "Europe/Paris"])})))
    options = draw(st.fixed_dictionaries(
        {}, optional={k: v for k, v in job_options.items() if k != "id"}))
    return Call("repeat", (draw(names), draw(anything)), {**rule, **options}, queue=draw(names))


CALLS: dict[str, st.SearchStrategy[Call]] = {
    "add": st.builds(lambda p, o, u, t: Call("add", (p,), {**o, **u, **t}), payloads,
                     add_options,
                     st.fixed_dictionaries({}, optional={"unique": ids,
                                                         "unique_ttl_ms": positive,
                                                         "replace": st.booleans(),
                                                         "extend": st.booleans()})
                     .map(lambda u: u if "unique" in u else {}),  # a TTL needs its key
                     st.fixed_dictionaries({}, optional={"trace": st.just(TRACE)})),
    "add_unique": st.builds(lambda p, k, t, o: Call("add_unique", (p, k), {**t, **o}),
                            payloads, ids,
                            st.fixed_dictionaries({}, optional={"ttl_ms": positive,
                                                                "replace": st.booleans(),
                                                                "extend": st.booleans()}),
                            add_options),
    "add_json": st.builds(lambda v, o: Call("add_json", (v,), o), json_values, add_options),
    "add_many": st.builds(lambda jobs, o: Call("add_many", (jobs,), o),
                          st.lists(anything | add_options.flatmap(
                              lambda o: anything.map(lambda p: NewJob(p, **o))), max_size=3),
                          # a job's own AT beside a shared DELAY is refused, not "its own wins";
                          # an id is a job's own (NewJob(payload, id=...)), never shared
                          st.fixed_dictionaries(
                              {}, optional={k: v for k, v in job_options.items() if k != "id"})),
    "add_and_wait": st.builds(lambda p, t, o: Call("add_and_wait", (p,), {"timeout_ms": t, **o},
                                                   ([b"7"],)),
                              anything, non_negative, add_options),
    "wait": call("wait", ids, non_negative),
    "logs": call("logs", ids, start=non_negative, count=positive),
    "get": call("get", ids),
    "stats": call("stats"),
    "revive": call("revive", ids, reset=st.booleans()),
    "remove": call("remove", ids),
    "cancel": call("cancel", ids, reason=st.text(max_size=12)),
    "metrics": call("metrics", from_ms=non_negative, to_ms=non_negative),
    "order_worker": call("order_worker", ids, st.sampled_from(["quiet", "stop", "run"])),
    "beat": call("beat", ids),
    "pause": call("pause"),
    "resume": call("resume"),
    "dead": call("dead", non_negative, positive,
                 replies=([[b"1", b"job-2"]],)),
    "get_config": call("get_config", field=st.sampled_from(list(settings_values))),
    "set_config": st.builds(lambda s, q: Call("set_config", (), s, queue=q),
                            st.fixed_dictionaries({}, optional=settings_values)
                            .filter(bool), names),
    "queues": call("queues"),
    "lanes": call("lanes"),
    "set_lane_limit": call("set_lane_limit", names, non_negative),
    "set_rate": call("set_rate", positive, positive),
    "clear_rate": call("clear_rate"),
    "set_lane_rate": call("set_lane_rate", names, positive, positive),
    "clear_lane_rate": call("clear_lane_rate", names),
    "flow": flows(),
    "children": call("children", ids),
    "repeat": repeats(),
    "delete_repeat": call("delete_repeat", names),
    "repeats": call("repeats"),
    "promote": call("promote", limit=positive),
    "claim": call("claim", positive, count=positive, block_ms=non_negative,
                  with_trace=st.booleans()),
    "complete": call("complete", st.just(JOB), result=anything),
    "fail": call("fail", st.just(JOB), error=st.text(max_size=12), max_attempts=positive,
                 backoff_ms=non_negative),
    "requeue": call("requeue", st.just(JOB), delay_ms=non_negative),
    "progress": call("progress", st.just(JOB), anything),
    "log": call("log", st.just(JOB), payloads),
    "extend": call("extend", st.just(JOB), positive),
}

# Every option of every method at least once (the coverage test counts their tokens).
EXAMPLES = [
    Call("add", (b"x",), {"id": "a", "delay_ms": 5, "priority": -3, "max_attempts": 2,
                          "backoff": "exp:10:100", "group": "g", "unique": "k",
                          "unique_ttl_ms": 60000}),
    Call("add", ("x",), {"at_ms": 1700000000000, "trace": TRACE}),
    Call("add", ("x",), {"delay_ms": 300, "unique": "box-7", "replace": True, "extend": True}),
    Call("add_unique", (b"x", "k"), {"ttl_ms": 5, "priority": 1, "replace": True}),
    Call("add_json", ({"a": 1},), {"group": "g"}),
    Call("add_many", ([b"a", {"b": 2}, NewJob(b"c", delay_ms=1)],), {"max_attempts": 3}),
    Call("add_and_wait", (b"x",), {"timeout_ms": 100, "at_ms": 5}, ([b"7"],)),
    Call("wait", ("7", 0)),
    Call("logs", ("7",), {"start": 2, "count": 10}),
    Call("get", ("7",)),
    Call("stats"),
    Call("revive", ("7",), {"reset": True}),
    Call("remove", ("7",)),
    Call("cancel", ("7",), {"reason": "the user closed the tab"}),
    Call("metrics", (), {"from_ms": 0, "to_ms": 1700000000000}),
    Call("order_worker", ("emqd-worker?host=a&pid=1", "quiet")),
    Call("order_worker", ("emqd-worker?host=a&pid=1", "stop")),
    Call("order_worker", ("emqd-worker?host=a&pid=1", "run")),
    Call("beat", ("emqd-worker?host=a&pid=1",)),
    Call("pause"),
    Call("resume"),
    Call("dead", (0, 10), replies=([[b"1", b"2"]],)),
    Call("get_config"),
    Call("get_config", ("max_attempts",)),
    Call("set_config", (), {"max_attempts": 5, "backoff": "fixed:100", "lane_limit": 0}),
    Call("queues"),
    Call("lanes"),
    Call("set_lane_limit", ("g", 2)),
    Call("set_rate", (10, 1000)),
    Call("clear_rate"),
    Call("set_lane_rate", ("g", 10, 1000)),
    Call("clear_lane_rate", ("g",)),
    Call("flow", ({"p": 1}, [Child("build", b"linux", id="c1", max_attempts=1),
                             Child("build", b"mac", under=1, on_child_fail="ignore"),
                             Child("docs", b"html", under=2, delay_ms=5, backoff="0",
                                   at_ms=None, group="g", priority=2)]),
         {"id": "p", "on_child_fail": "remove", "priority": 1}),
    Call("flow", (b"p", [Child("q", b"c", at_ms=1)]), {"on_child_fail": "fail",
                                                        "trace": TRACE}),
    # A name the client shows as text (not UTF-8: surrogateescape) is sent as its bytes.
    Call("stats", queue=b"caf\xe9".decode("utf-8", "surrogateescape")),
    Call("flow", (b"p", [Child(b"caf\xe9".decode("utf-8", "surrogateescape"), b"c")])),
    Call("children", ("7",)),
    Call("repeat", ("nightly", b"x"), {"cron": "0 3 * * *", "tz": "UTC", "priority": 1,
                                       "max_attempts": 2, "backoff": "exp:10",
                                       "group": "g"}),
    Call("repeat", ("often", {"a": 1}), {"every_ms": 1000}),
    Call("delete_repeat", ("nightly",)),
    Call("repeats"),
    Call("promote", (), {"limit": 10}),
    Call("claim", (30000,), {"count": 5, "block_ms": 0, "with_trace": True}),
    Call("complete", (JOB,), {"result": {"ok": True}}),
    Call("fail", (JOB, "boom"), {"max_attempts": 3, "backoff_ms": 500}),
    Call("requeue", (JOB,), {"delay_ms": 60000}),
    Call("progress", (JOB, 50)),
    Call("log", (JOB, "a line")),
    Call("extend", (JOB, 30000)),
]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda c: c.method)
def test_each_option_of_each_method_sends_what_the_table_describes(example: Call) -> None:
    for argv in example.sent():
        check(argv)


@pytest.mark.parametrize("method", sorted(CALLS))
def test_any_call_sends_what_the_table_describes_and_the_parser_takes(method: str) -> None:
    @settings(max_examples=30, database=None, deadline=None)
    @given(CALLS[method])
    def run(drawn: Call) -> None:
        for argv in drawn.sent():
            check(argv)

    run()


def test_every_method_and_every_token_of_the_verbs_it_sends_is_exercised() -> None:
    public = {name for name in vars(QueueCommands)
              if not name.startswith("_") and callable(getattr(QueueCommands, name))}
    assert public - set(SENDS_NO_VERB) == set(CALLS) == {example.method for example in EXAMPLES}
    sent: dict[str, set[bytes]] = {}
    for example in EXAMPLES:
        for argv in example.sent():
            name = argv[0].decode().lower()
            table = {token.upper() for token in tokens(ARGUMENTS.get(name, []))}
            sent.setdefault(name, set()).update(word.upper() for word in argv[1:]
                                                if word.upper() in table)
    emq = {name for name in sent if name.startswith("emq.")}
    assert emq | NO_CLIENT_METHOD == set(VERB_MODULES)
    for name in emq:
        missing = tokens(ARGUMENTS.get(name, [])) - sent[name]
        assert missing == NOT_SENT_BY_THE_CLIENT.get(name, set()), name


def test_the_routes_look_is_what_the_table_describes() -> None:
    """Queue and Worker learn where a queue is with EMQ.FRONTS and EMQ.OWNER
    (emqd/client/routes.py), not a queue method: each as its table entry describes it."""
    for command in Routes(["redis://127.0.0.1:6390"], b"mail").look:
        argv = [bytes(ENCODER.encode(word)) for word in command]
        name = argv[0].decode().lower()
        assert name in NO_CLIENT_METHOD and matches(argv[1:], ARGUMENTS.get(name, [])), argv
