"""A verb's syntax is written once, as its COMMAND DOCS arguments (emqd/commands/docs.py);
every copy of it is that table rendered (tests/syntax.py): the verb module's docstring
opens with it, and docs/PROTOCOL.md's heading for the verb is it."""

from __future__ import annotations

import ast
import re
from types import ModuleType

import pytest

from emqd import verbs
from emqd.commands.docs import ARGUMENTS
from emqd.dispatch import TABLE
from tests.support import ROOT
from tests.syntax import VERB_MODULES, render

VERBS = sorted(VERB_MODULES)
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


def _opening(module: ModuleType) -> str:
    """The first paragraph of the module's docstring, read from its source (a compiled
    module keeps none), its line breaks as spaces."""
    source = ROOT / (module.__name__.replace(".", "/") + ".py")
    docstring = ast.get_docstring(ast.parse(source.read_text()), clean=True) or ""
    return " ".join(docstring.split("\n\n")[0].split())


@pytest.mark.parametrize("module", verbs.ALL, ids=lambda module: module.__name__)
def test_each_verb_module_opens_with_its_syntax(module: ModuleType) -> None:
    assert _opening(module) == " ".join(syntax(row.name) for row in module.COMMANDS)


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
