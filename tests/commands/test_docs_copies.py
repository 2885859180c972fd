"""A verb's syntax is written once, as its COMMAND DOCS arguments (emqd/commands/docs.py);
every copy of it is that table rendered (tests/syntax.py): the verb module's docstring
opens with it, and docs/PROTOCOL.md's heading for the verb is it. The parser is what
users rely on, so the table must describe it, both ways: whatever argv the table
describes, the verb's parser takes as well formed, and it knows each token the table
names; and no word the parser knows as a keyword is missing from the table
(tests/client/test_commands_syntax.py checks the client's argv against both;
tests/commands/test_docs.py the command table's arity)."""

from __future__ import annotations

import ast
import functools
import re
from types import ModuleType

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from emqd import errors
from emqd.commands.docs import ARGUMENTS
from emqd.config import Config
from emqd.dispatch import TABLE, lookup
from emqd.errors import ReplyError
from emqd.rules.settings import FIELDS
from tests.support import ROOT
from tests.syntax import (
    VERB_MODULES,
    Argument,
    Word,
    described,
    every_part,
    matches,
    render,
    tokens,
)

VERBS = sorted(VERB_MODULES)
MODULES = list(dict.fromkeys(VERB_MODULES.values()))  # each once
HEADING = re.compile(r"^#{2,6} (EMQ\.\S+)(?: .*)?$")


def syntax(name: str) -> str:
    return render(name, ARGUMENTS.get(name, []))


def test_every_verb_in_the_command_table_has_its_entry_and_every_entry_is_a_verb() -> None:
    """A verb that takes arguments has them in the table; one that takes none has no
    entry, as a Redis command without arguments has no `arguments` in its DOCS."""
    registered = {name.decode() for name in TABLE if name.startswith(b"emq.")}
    assert registered == set(VERBS)
    with_arguments = {name for name in VERBS if TABLE[name.encode()].arity != 1}
    assert {name for name in ARGUMENTS if name.startswith("emq.")} == with_arguments


def _opening(module: ModuleType) -> list[str]:
    """The syntax lines the module's docstring (read from its source: a compiled module
    keeps none) opens with: its first paragraph, each line that starts with `EMQ.`
    beginning the next, the others continuing a long one."""
    source = ROOT / (module.__name__.replace(".", "/") + ".py")
    docstring = ast.get_docstring(ast.parse(source.read_text()), clean=True) or ""
    lines: list[str] = []
    for line in docstring.split("\n\n")[0].splitlines():
        if line.startswith("EMQ.") or not lines:
            lines.append(line)
        else:
            lines[-1] += " " + line
    return [" ".join(line.split()) for line in lines]


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_each_verb_module_opens_with_its_syntax(module: ModuleType) -> None:
    assert _opening(module) == [syntax(row.name) for row in module.COMMANDS]


def _headings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    in_code = False
    for line in (ROOT / "docs" / "PROTOCOL.md").read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else HEADING.match(line)
        if heading:
            found.setdefault(heading.group(1).lower(), []).append(line.lstrip("#").strip())
    return found


def test_protocol_md_gives_each_verb_one_heading_that_is_its_syntax() -> None:
    headings = _headings()
    assert set(headings) <= set(VERBS), "a heading names no verb"
    for name in VERBS:
        assert headings.get(name) == [syntax(name)], name


# Values the parsers take where the table's type says only "string" (the rest: any word).
VALUES: dict[bytes, list[bytes]] = {
    b"backoff-rule": [b"0", b"fixed:100", b"exp:10", b"exp:10:1000"],
    b"expression": [b"*/5 * * * *", b"0 8 * * 1", b"@hourly"],
    b"zone": [b"UTC", b"Europe/Paris"],
    b"field": sorted(FIELDS),  # EMQ.CONFIG's settings; "5" is a value of each
    b"value": [b"5"],
}
TOKENS = {token.upper() for arguments in ARGUMENTS.values() for token in tokens(arguments)}
words = st.binary(min_size=1, max_size=8).filter(
    lambda word: not {*b"{}"} & {*word} and word.upper() not in TOKENS)  # as in Redis, a
# value that spells a token is read as the token


def value(arg: Argument) -> st.SearchStrategy[bytes]:
    if arg[b"name"] in VALUES:
        return st.sampled_from(VALUES[arg[b"name"]])
    if arg[b"type"] == b"integer":
        return st.integers(1, 1000).map(lambda n: b"%d" % n)
    return words


@pytest.mark.parametrize("name", [name for name in VERBS if name in ARGUMENTS
                                  and hasattr(VERB_MODULES[name], "parse")])
def test_whatever_the_table_describes_the_verb_s_parser_takes_as_well_formed(name: str) -> None:
    """Any refusal but `ERR syntax error` is a value's (a flow's UNDER past its children,
    a schedule's cron): the shape was right."""
    parse = VERB_MODULES[name].parse

    @settings(max_examples=40, database=None, deadline=None)
    @given(described(ARGUMENTS[name], value))
    def run(argv: list[bytes]) -> None:
        assert matches(argv, ARGUMENTS[name])
        if name == "emq.config":  # the table cannot say "no field twice"; SET refuses it
            fields = argv[2::2]
            assume(len({field.lower() for field in fields}) == len(fields))
        try:
            parse([name.upper().encode(), *argv], Config())
        except ReplyError as refusal:
            assert refusal != errors.SYNTAX(), f"{render(name, ARGUMENTS[name])}: {argv!r}"

    run()


# The two-way test: a parser "knows" a word where putting it in an argv changes what the
# parser answers, against an argv that has, in its place, a word no code of emqd names.
UNKNOWN = b"never-named-0"
PARSED = [name for name in VERBS if hasattr(VERB_MODULES[name], "parse")]
# EMQ.FRONT and EMQ.FRONTS are connections' (emqd/commands/fronts.py), read by their handlers.
assert set(VERBS) - set(PARSED) == {"emq.front", "emq.fronts", "emq.owner"}


def first_value(arg: Argument) -> bytes:
    """One value the parser takes for `arg`: an UNDER names the parent (0), any other
    integer 1, a string its argument's own name."""
    if arg[b"name"] in VALUES:
        return VALUES[arg[b"name"]][0]
    if arg[b"type"] == b"integer":
        return b"0" if arg[b"name"] == b"under" else b"1"
    return b"v-" + arg[b"name"]


def answer(name: str, argv: list[bytes], word: bytes = UNKNOWN) -> str:
    """What the command table's arity check and the verb's parser answer to `argv`, with
    `word` quoted as UNKNOWN would be (EMQ.CONFIG's "unknown field 'x'")."""
    full = [name.upper().encode(), *argv]
    refusal = lookup(full)
    if not isinstance(refusal, ReplyError):
        try:
            VERB_MODULES[name].parse(full, Config())
            return "taken"
        except ReplyError as error:
            refusal = error
    return refusal.message.replace(b"'%s'" % word, b"'%s'" % UNKNOWN).decode("latin-1")


@functools.cache
def named_words() -> frozenset[bytes]:
    """Every word emqd's code writes as a whole string or bytes literal, in capitals: a
    parser can know no keyword but one of these (the verbs compare each argument, upper-
    or lower-cased first, with a literal), so this is where to look."""
    found: set[bytes] = set()
    for path in (ROOT / "emqd").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
                raw = node.value.encode() if isinstance(node.value, str) else node.value
                if re.fullmatch(rb"[A-Za-z][A-Za-z0-9_.:|-]*", raw):
                    found.add(raw.upper())
    assert UNKNOWN.upper() not in found
    return frozenset(found)


def _spoken(argv: list[Word]) -> list[bytes]:
    return [word for word, _ in argv]


@pytest.mark.parametrize("name", [name for name in PARSED if name in ARGUMENTS])
def test_the_verb_s_parser_knows_each_token_the_table_names(name: str) -> None:
    shapes = every_part(ARGUMENTS[name], first_value)
    assert {word for argv in shapes for word, kind in argv if kind == "token"} == tokens(
        ARGUMENTS[name])
    for argv in shapes:
        said = _spoken(argv)
        assert answer(name, said) != errors.SYNTAX.message.decode(), said  # well formed
        for at, (word, kind) in enumerate(argv):
            if kind == "token":
                unknown = [*said[:at], UNKNOWN, *said[at + 1:]]
                assert answer(name, unknown) != answer(name, said), (word, said)


def _probes(argv: list[Word]) -> list[tuple[bytes, ...]]:
    """Each place a keyword could hide in `argv`, as the argv with UNKNOWN there: before
    each word (a keyword's value, if it takes one, is the word after it), at the end alone
    and with a value, and instead of each token and each integer (a parser may take a word
    there as well)."""
    said = _spoken(argv)
    probes = [(*said[:at], UNKNOWN, *said[at:]) for at in range(len(said) + 1)]
    probes.append((*said, UNKNOWN, b"1"))
    probes += [(*said[:at], UNKNOWN, *said[at + 1:])
               for at, (_, kind) in enumerate(argv) if kind in ("token", "integer")]
    return probes


@pytest.mark.parametrize("name", PARSED)
def test_every_keyword_the_verb_s_parser_knows_is_in_the_table(name: str) -> None:
    """Each word of emqd's code that is neither a token of the verb's table nor a value
    its parser takes (VALUES), put wherever a keyword could go, is answered as an unknown
    word is."""
    arguments = ARGUMENTS.get(name, [])
    own = {token.upper() for token in tokens(arguments)}
    own |= {value.upper() for values in VALUES.values() for value in values}
    candidates = sorted(word for word in named_words() if word.upper() not in own)
    probes = {probe for argv in every_part(arguments, first_value) for probe in _probes(argv)}
    known = []
    for probe in sorted(probes):
        said, at = list(probe), probe.index(UNKNOWN)
        expected = answer(name, said)
        for word in candidates:
            said[at] = word
            if answer(name, said, word) != expected:
                known.append(b" ".join(said))
    assert not known, f"{render(name, arguments)}, yet the parser knows: {known[:5]}"
