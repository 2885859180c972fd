"""docs/ARCHITECTURE.md's layout names every module of emqd/, where it lives, and no other.

The block under "A layout that shows it" has one entry per root module or folder
(a line indented two spaces: `name.py` or `name/`, or `a.py, b.py` sharing one
description); a folder's entry (its lines up to the next entry) names each module
of the folder. A module added, moved or removed without the picture fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

PACKAGE = ROOT / "emqd"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
ENTRY = re.compile(r"^  (\S[^ ]*(?: [^ ]+\.py)*)\s")  # `name.py`, `a.py, b.py` or `name/`
MODULE = re.compile(r"\b([a-z_]+\.py)\b")


def _entries() -> dict[str, str]:
    """Each entry's name (a root module or `folder/`) -> its text."""
    text = DOC.read_text()
    block = text.split("## A layout that shows it", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    current: list[str] = []
    for line in block.splitlines():
        match = ENTRY.match(line)
        if not line.startswith(" "):
            current = []  # emqd/ and tests/: not entries
        elif match:
            names = [name.strip() for name in match.group(1).split(",")]
            current = names
            for name in names:
                entries[name] = ""
        for name in current:
            entries[name] += line + "\n"
    return entries


def _modules(folder: Path) -> set[str]:
    return {path.name for path in folder.glob("*.py")} - {"__init__.py"}


def test_every_root_module_and_folder_has_an_entry_and_no_entry_is_stale() -> None:
    entries = _entries()
    folders = {path.name + "/" for path in PACKAGE.iterdir()
               if (path / "__init__.py").exists()}
    named = {name for name in entries if name.endswith(("/", ".py"))}
    # flag_help.py rides in cli.py's entry
    root_named = named | set(MODULE.findall(entries.get("cli.py", "")))
    missing = (_modules(PACKAGE) | folders) - root_named
    assert not missing, sorted(missing)
    stale = named - _modules(PACKAGE) - folders
    assert not stale, sorted(stale)


def test_each_folder_entry_names_its_modules_and_only_those() -> None:
    for name, text in _entries().items():
        if not name.endswith("/"):
            continue
        folder = PACKAGE / name.rstrip("/")
        mentioned = set(MODULE.findall(text))
        assert _modules(folder) <= mentioned, (name, sorted(_modules(folder) - mentioned))
        assert mentioned <= _modules(folder), (name, sorted(mentioned - _modules(folder)))


def test_the_root_holds_a_handful_of_modules() -> None:
    """Issue 37: at most 15 modules in emqd/ itself; the rest live in wings."""
    assert len(_modules(PACKAGE)) <= 15, sorted(_modules(PACKAGE))
