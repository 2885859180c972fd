"""A command's syntax from its COMMAND DOCS arguments (emqd/commands/docs.py): rendered, matched.

The arguments table is the one source of a verb's syntax; the copies (each
verb module's docstring, docs/PROTOCOL.md's headings) are its rendering, and
the client's argv must match it. Both readings live here, apart from the
server, which needs neither.

`render` writes one line the way redis.io writes Redis's own commands
(`ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]`):
the command's name and each token in capitals, typed as they are; each value
by its argument's name, in lower case; `[...]` around what is optional;
`a | b` for a choice, inside `<...>` unless the brackets of an optional
choice without a token already hold it; `x [x ...]` for what repeats (with
its token only when the token repeats too). One departure from redis.io, so
that EMQ.FLOW's line stays readable: a repeated block that opens with a token
repeats as that token, `CHILD child-queue child-payload ... [CHILD ...]`.

`matches` says whether an argv (the words after the command's name) is one the
arguments describe: tokens in any case, the parts in the table's order, an
integer or double value one that parses as such (loosely: the parser decides
the ranges). The verbs take their options in any order; the table's order is
the one the client sends and the docs show, so matching in it checks both.
`described` draws argvs the other way, from the arguments, for a verb's parser to take.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from emqd import dispatch

Argument = dict[bytes, Any]

#: The module of each EMQ command (its docstring, and its parser where it has one: the
#: verbs'), by the command's lower-case name.
VERB_MODULES: dict[str, ModuleType] = {
    row.name: module for module in (*dispatch.COMMAND_MODULES, *dispatch.VERB_MODULES)
    for row in module.COMMANDS if row.name.startswith("emq.")}


def _flags(arg: Argument) -> set[str]:
    flags = arg.get(b"flags")
    return set() if flags is None else set(flags.items)


def _token(arg: Argument) -> str | None:
    token = arg.get(b"token")
    return None if token is None else token.decode()


def render(name: str, arguments: Iterable[Argument]) -> str:
    """`EMQ.COMPLETE queue id token [RESULT result]`: the one-line syntax of `name`."""
    return " ".join([name.upper().replace("|", " "), *map(_render, arguments)])


def _render(arg: Argument) -> str:
    kind, token, flags = arg[b"type"].decode(), _token(arg), _flags(arg)
    optional = "optional" in flags
    if kind == "pure-token":
        body = ""
    elif kind == "block":
        body = " ".join(map(_render, arg[b"arguments"]))
    elif kind == "oneof":
        body = " | ".join(map(_render, arg[b"arguments"]))
        if token is not None or not optional:
            body = f"<{body}>"
    else:
        body = arg[b"name"].decode()
    text = " ".join(part for part in (token, body) if part)
    if "multiple" in flags:
        text = f"{text} [{_again(arg, text, body)} ...]"
    return f"[{text}]" if optional else text


def _again(arg: Argument, text: str, body: str) -> str:
    """What a repetition writes before its `...`: the token only when it repeats too,
    and of a block that opens with a token, that token alone."""
    if "multiple_token" in _flags(arg):
        return text
    if arg[b"type"] == b"block":
        first = _token(arg[b"arguments"][0])
        if first is not None:
            return first
    return body


def matches(argv: list[bytes], arguments: list[Argument]) -> bool:
    """Whether `argv` (after the command's name) is one that `arguments` describe."""
    return len(argv) in _sequence(arguments, argv, {0})


def _sequence(arguments: Iterable[Argument], argv: list[bytes], starts: set[int]) -> set[int]:
    """Where matching every argument in turn can end, from any of `starts`."""
    for arg in arguments:
        starts = {end for start in starts for end in _argument(arg, argv, start)}
    return starts


def _argument(arg: Argument, argv: list[bytes], start: int) -> set[int]:
    """The ends of `arg` matched at `start`, with its flags: optional, multiple."""
    flags = _flags(arg)
    ends = _once(arg, argv, start, with_token=True)
    if "multiple" in flags:
        again = "multiple_token" in flags
        frontier = ends
        while frontier:
            frontier = {end for at in frontier
                        for end in _once(arg, argv, at, with_token=again)} - ends
            ends |= frontier
    if "optional" in flags:
        ends.add(start)
    return ends


def _once(arg: Argument, argv: list[bytes], start: int, *, with_token: bool) -> set[int]:
    token = arg.get(b"token")
    if with_token and token is not None:
        if start >= len(argv) or argv[start].upper() != token.upper():
            return set()
        start += 1
    kind = arg[b"type"]
    if kind == b"pure-token":
        return {start}
    if kind == b"block":
        return _sequence(arg[b"arguments"], argv, {start})
    if kind == b"oneof":
        return {end for choice in arg[b"arguments"] for end in _argument(choice, argv, start)}
    if start < len(argv) and _is_value(kind, argv[start]):
        return {start + 1}
    return set()


def _is_value(kind: bytes, word: bytes) -> bool:
    try:
        if kind == b"integer":
            int(word)
        elif kind == b"double":
            float(word)
    except ValueError:
        return False
    return True


def described(arguments: Iterable[Argument],
              value: Callable[[Argument], st.SearchStrategy[bytes]]) -> st.SearchStrategy[
                  list[bytes]]:
    """Argvs (after the command's name) that `arguments` describe: each option in or out,
    each choice taken, each repetition 1 to 3 times, tokens in either case, and each
    value drawn from `value(argument)`."""
    parts = [_described(arg, value) for arg in arguments]
    return st.tuples(*parts).map(lambda drawn: [word for part in drawn for word in part])


def _described(arg: Argument, value: Callable[[Argument], st.SearchStrategy[bytes]]
               ) -> st.SearchStrategy[list[bytes]]:
    flags, token, kind = _flags(arg), arg.get(b"token"), arg[b"type"]
    if kind == b"pure-token":
        body: st.SearchStrategy[list[bytes]] = st.just([])
    elif kind == b"block":
        body = described(arg[b"arguments"], value)
    elif kind == b"oneof":
        body = st.one_of([_described(choice, value) for choice in arg[b"arguments"]])
    else:
        body = value(arg).map(lambda word: [word])
    lead = st.just([]) if token is None else st.sampled_from([[token], [token.lower()]])
    once = st.tuples(lead, body).map(lambda drawn: drawn[0] + drawn[1])
    if "multiple" in flags:
        again = once if "multiple_token" in flags else body
        once = st.tuples(once, st.lists(again, max_size=2)).map(
            lambda drawn: drawn[0] + [word for part in drawn[1] for word in part])
    return st.just([]) | once if "optional" in flags else once


def tokens(arguments: Iterable[Argument]) -> set[bytes]:
    """Every token the arguments name, at any depth."""
    found: set[bytes] = set()
    for arg in arguments:
        if b"token" in arg:
            found.add(arg[b"token"])
        found |= tokens(arg.get(b"arguments", []))
    return found


def words(arguments: Iterable[Argument]) -> tuple[int, float]:
    """How many words a call takes at least and at most (`math.inf`: no bound)."""
    least, most = 0, 0.0
    for arg in arguments:
        flags = _flags(arg)
        own = 1 if b"token" in arg else 0
        kind = arg[b"type"]
        if kind == b"block":
            low, high = words(arg[b"arguments"])
        elif kind == b"oneof":
            ranges = [words([choice]) for choice in arg[b"arguments"]]
            low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
        elif kind == b"pure-token":
            low, high, own = 1, 1, 0
        else:
            low, high = 1, 1
        if "multiple" in flags:
            high = math.inf
        if "optional" not in flags:
            least += own + low
        most += own + high
    return least, most


Word = tuple[bytes, str]  # a word of an argv and what it is: "token", "integer" or "value"


def every_part(arguments: list[Argument], value: Callable[[Argument], bytes]) -> list[list[Word]]:
    """Argvs (after the command's name) that, together, hold every part the arguments name:
    the shortest (each option left out, each choice's first), then one per choice index k
    with every option in, each choice's k-th (modulo its count), each repetition once.
    Deterministic, so that a test can say "every token" and mean it."""
    widest = max([_choices(arguments), 1])
    drawn = [_words(arguments, value, 0, full=False)]
    drawn += [_words(arguments, value, k, full=True) for k in range(widest)]
    return [argv for at, argv in enumerate(drawn) if argv not in drawn[:at]]


def _choices(arguments: Iterable[Argument]) -> int:
    """The most choices any `oneof` among the arguments offers, at any depth."""
    return max([0, *(max(len(arg[b"arguments"]) if arg[b"type"] == b"oneof" else 0,
                          _choices(arg.get(b"arguments", []))) for arg in arguments)])


def _words(arguments: Iterable[Argument], value: Callable[[Argument], bytes], k: int, *,
           full: bool) -> list[Word]:
    said: list[Word] = []
    for arg in arguments:
        if "optional" in _flags(arg) and not full:
            continue
        token, kind = arg.get(b"token"), arg[b"type"]
        if token is not None:
            said.append((token, "token"))
        if kind == b"block":
            said += _words(arg[b"arguments"], value, k, full=full)
        elif kind == b"oneof":
            choices = arg[b"arguments"]
            said += _words([{**choices[k % len(choices)], b"flags": None}], value, k, full=full)
        elif kind != b"pure-token":
            said.append((value(arg), "integer" if kind == b"integer" else "value"))
    return said
