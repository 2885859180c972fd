"""The modules setup.py compiles with mypyc, and whether a tree's compiled core is current.

The list lives in pyproject.toml ([tool.emqd] compiled); setup.py builds it,
scripts/test rebuilds only when a listed source (or the build's own files) is
newer than what was built, and tests/test_core_build.py checks that what runs
is the core of the kind and age it should be. Standard library only: setup.py
and scripts/test read this before emqd's dependencies are installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = (".so", ".pyd")


def compiled_sources(root: Path = ROOT) -> list[Path]:
    """The .py files of the compiled core; an entry ending in / is a whole package."""
    with open(root / "pyproject.toml", "rb") as file:
        entries: list[str] = tomllib.load(file)["tool"]["emqd"]["compiled"]
    files: list[Path] = []
    for entry in entries:
        path = root / entry
        files += sorted(path.glob("*.py")) if entry.endswith("/") else [path]
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
    """The compiled core's sources that have no extension beside them, or one
    older than the source or than the build's description (setup.py, pyproject.toml)."""
    described = max((root / name).stat().st_mtime for name in ("setup.py", "pyproject.toml"))
    stale = []
    for source in compiled_sources(root):
        built = built_extension(source)
        if built is None or built.stat().st_mtime < max(described, source.stat().st_mtime):
            stale.append(source)
    return stale


if __name__ == "__main__":  # scripts/test: exit 0 when the compiled core is current
    raise SystemExit(1 if stale_sources() else 0)
