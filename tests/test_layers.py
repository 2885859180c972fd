"""The layering rules of docs/ARCHITECTURE.md, checked on the import graph.

Every import counts: at module level, under `if TYPE_CHECKING:` and inside a
function, and importing `a.b.c` counts as importing the packages `a` and `a.b`
too (their `__init__` runs first) -- except a module's own packages: `a.b.x`
importing `a.b.c` depends on `a.b`'s `__init__` only when it takes a name that
`__init__` defines (`from a.b import Name`), since Python runs a module's own
packages before the module whatever it imports (a package whose `__init__`
re-exports its modules is not a circle by that alone). The rules:

- no import circle at all in emqd/;
- `persist/` (the file sink) imports nothing of the connections (`wire/`,
  `session`), of the command layer (`dispatch`, `core`) or of the commit path
  itself (`commit`): a sink knows records and offsets, nothing else.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PERSIST_MUST_NOT_IMPORT = ("emqd.wire", "emqd.core", "emqd.dispatch", "emqd.commit.path")
# The Python client (and the benchmark, which drives it) is the server's user, not a part
# of it: a server that imported it would load redis-py's client and the worker for nothing.
CLIENT_SIDE = ("emqd.client", "emqd.bench")


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name)."""
    found = {}
    for path in (root / package).rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """`name`, or the longest of its prefixes that is a module we know."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The known modules `name` imports anywhere in its source, with their parent packages
    (but for its own packages, reached only by a name imported from them)."""
    is_package = path.name == "__init__.py"
    own = {".".join(name.split(".")[:size]) for size in range(1, name.count(".") + 1)}
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            module = _known(target, known)
            if module is None:
                continue
            if module != name and (module not in own or target != module):
                yield module
            parts = module.split(".")
            for size in range(1, len(parts)):
                ancestor = ".".join(parts[:size])
                if ancestor in known and ancestor != name and ancestor not in own:
                    yield ancestor


def graph(root: Path, package: str) -> dict[str, set[str]]:
    known = modules(root, package)
    return {name: set(imports(name, path, known)) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_no_import_circle_in_the_package() -> None:
    assert [sorted(circle) for circle in circles(graph(ROOT, "emqd"))] == []


def test_persist_imports_nothing_of_the_connections_the_commands_or_the_commit_path() -> None:
    edges = graph(ROOT, "emqd")
    bad = {module: sorted(target for target in targets if _in(target, PERSIST_MUST_NOT_IMPORT))
           for module, targets in edges.items() if _in(module, ("emqd.persist",))}
    assert {module: targets for module, targets in bad.items() if targets} == {}


def test_the_server_imports_nothing_of_the_client() -> None:
    edges = graph(ROOT, "emqd")
    bad = {module: sorted(target for target in targets if _in(target, ("emqd.client",)))
           for module, targets in edges.items() if not _in(module, CLIENT_SIDE)}
    assert {module: targets for module, targets in bad.items() if targets} == {}


# --- the walker itself finds what it must find -------------------------------------------
@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A package with a circle through each kind of import the rules count."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg import top\n")
    (pkg / "top.py").write_text("from typing import TYPE_CHECKING\n"
                                "if TYPE_CHECKING:\n    from pkg.lazy import Thing\n")
    (pkg / "lazy.py").write_text("def f():\n    from pkg.sub import leaf\n    return leaf\n")
    (pkg / "sub" / "leaf.py").write_text("X = 1\n")
    (pkg / "alone.py").write_text("import pkg.top\n")
    return tmp_path


def test_the_walker_counts_type_checking_function_local_and_package_imports(
        planted: Path) -> None:
    # lazy -> pkg.sub.leaf (function-local) -> pkg.sub (its package init) -> top ->
    # lazy (under TYPE_CHECKING): one circle; `alone` only imports into it.
    assert circles(graph(planted, "pkg")) == [{"pkg.top", "pkg.lazy", "pkg.sub"}]
    assert "pkg.sub" in graph(planted, "pkg")["pkg.lazy"]


def test_a_package_that_re_exports_its_modules_is_a_circle_only_when_one_takes_its_names(
        tmp_path: Path) -> None:
    """`face/__init__.py` imports its modules, and `face.b` imports its sibling `face.a`
    (its own package runs first anyway): no circle. `face.c` taking a name the
    `__init__` defines (`from face import A`) is one."""
    face = tmp_path / "face"
    face.mkdir()
    (face / "__init__.py").write_text("from face.a import A\nfrom face.b import B\n")
    (face / "a.py").write_text("class A: ...\n")
    (face / "b.py").write_text("from face.a import A\nfrom face import a\nB = A\n")
    assert circles(graph(tmp_path, "face")) == []
    (face / "c.py").write_text("from face import A\n")
    (face / "__init__.py").write_text("from face.a import A\nfrom face.c import *\n")
    assert circles(graph(tmp_path, "face")) == [{"face", "face.c"}]
