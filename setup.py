"""Build emqd, with its core compiled to C by mypyc where this machine can.

The core (the store, the planners, the dispatcher, the codec, the loop's server)
is plain typed Python; mypyc turns those modules into C extensions that run the
job cycle about twice as fast (docs/PERFORMANCE.md). Everything else in the
package, and the whole package where no C compiler or Python headers exist, runs
as the same Python source, so a machine without a compiler still gets a working
server. `EMQD_PURE=1` asks for the pure build on purpose.

The metadata is in pyproject.toml; this file only decides the extension modules.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # emqd.build (standard library only) names the modules

from emqd.build import EXTENSIONS, compiled_sources  # noqa: E402


def can_compile() -> bool:
    """A C compiler, Python's headers and mypyc, and nobody asking for pure."""
    if os.environ.get("EMQD_PURE", "") not in ("", "0"):
        return False
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return False
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return False
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return False
    return True


def remove_compiled_modules() -> None:
    """A build in place must not leave a previous build's extension modules beside
    the sources (Python would import them before the .py files): a pure build
    none, a compiled one none of a module it no longer compiles."""
    for built in (HERE / "emqd").rglob("*"):
        if built.suffix in EXTENSIONS:
            built.unlink()


def extension_modules() -> list[object]:
    if not can_compile():
        print("emqd: building the pure-Python core (no C compiler, Python.h or mypyc, "
              "or EMQD_PURE=1)")
        remove_compiled_modules()
        return []
    from mypyc.build import mypycify

    print("emqd: compiling the core with mypyc")
    remove_compiled_modules()
    # The checks of pyproject.toml's [tool.mypy] apply to the compiled modules;
    # the libraries a build environment lacks (pip's isolated one has none of
    # aiohttp, hiredis, ...) are typed as Any, and the interpreted modules the
    # core imports (the HTTP side) are read for their types but not judged:
    # with aiohttp untyped their strict checks would fail the build (scripts/test
    # runs strict mypy over the whole package with every library installed).
    # The modules share one library, emqd/core__mypyc*.so, inside the package.
    sources = [str(source.relative_to(HERE)) for source in compiled_sources(HERE)]
    return list(mypycify([*sources, "--ignore-missing-imports", "--follow-imports=silent"],
                         opt_level="3", group_name="emqd.core"))


def mark_built() -> None:
    """Date the in-place core library now: mypyc rewrites (and so relinks) only what
    changed, and a source touched without a change (a checkout) would otherwise
    look newer than its build for ever (emqd/build.py `stale_sources`)."""
    for library in (HERE / "emqd").glob("core__mypyc.*"):
        if library.suffix in EXTENSIONS:
            os.utime(library)


setup(ext_modules=extension_modules())
mark_built()
