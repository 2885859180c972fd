"""The modules setup.py compiles with mypyc, and whether a tree's compiled core is current.

The list lives in pyproject.toml ([tool.emqd] compiled); setup.py builds it,
scripts/test rebuilds only when a listed source is newer than the library that
was built from it, and tests/test_core_build.py checks that what runs
is the core of the kind and age it should be. Standard library only: setup.py
and scripts/test read this before emqd's dependencies are installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = (".so", ".pyd")


def compiled_sources(root: Path = ROOT) -> list[Path]:
    """The .py files of the compiled core; an entry ending in / is a whole package,
    but for its `__init__.py`: mypyc gives a compiled package init a wrong
    `__path__`, so `import emqd.store.hash` in a fresh interpreter failed, and a
    package init has nothing that runs per request."""
    with open(root / "pyproject.toml", "rb") as file:
        entries: list[str] = tomllib.load(file)["tool"]["emqd"]["compiled"]
    files: list[Path] = []
    for entry in entries:
        path = root / entry
        if entry.endswith("/"):
            files += sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
        else:
            files.append(path)
    return files


def module_name(source: Path, root: Path = ROOT) -> str:
    return ".".join(source.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def built_extension(source: Path) -> Path | None:
    """The extension module built in place beside `source`, if there is one."""
    for built in source.parent.glob(source.stem + ".*"):
        if built.suffix in EXTENSIONS:
            return built
    return None


def stale_sources(root: Path = ROOT) -> list[Path]:
    """The compiled core's sources that have no extension beside them, or are newer
    than the core's library (emqd/core__mypyc*.so), which every rebuild of a
    changed module links again (the small per-module extensions are only copied,
    so their times say nothing); and pyproject.toml or setup.py when newer than it
    (a module compiled or not, a dependency the tests now need)."""
    library = [p for p in (root / "emqd").glob("core__mypyc.*") if p.suffix in EXTENSIONS]
    built_at = library[0].stat().st_mtime if library else 0.0
    # the build's own files: what is compiled, and the dependencies the install brings
    build_files = [path for path in (root / "pyproject.toml", root / "setup.py") if path.exists()]
    return [source for source in compiled_sources(root)
            if built_extension(source) is None or source.stat().st_mtime > built_at] + [
        path for path in build_files if path.stat().st_mtime > built_at]


if __name__ == "__main__":  # scripts/test: exit 0 when the compiled core is current
    raise SystemExit(1 if stale_sources() else 0)
