"""Which core runs: the modules setup.py compiles with mypyc, or their Python source.

scripts/test sets EMQD_EXPECT_COMPILED=1 when it built the compiled core, so a
build that silently fell back to Python fails here instead of passing the suite
on the slower core. Either way the core is one kind, and a compiled one is no
older than its sources: a stale extension module would run old code.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
import redis

from emqd import core_build
from emqd.build import EXTENSIONS, ROOT, compiled_sources, module_name, stale_sources


def kind_of(module: str) -> str:
    loaded = importlib.import_module(module).__file__ or ""
    return "mypyc" if loaded.endswith(EXTENSIONS) else "pure"


def test_the_core_is_all_of_one_kind() -> None:
    modules = [module_name(source) for source in compiled_sources()]
    assert len(modules) > 20 and "emqd.commit.plan" in modules and "emqd.verbs.claim" in modules
    kinds = {module: kind_of(module) for module in modules}
    assert set(kinds.values()) == {core_build()}, kinds


@pytest.mark.parametrize("module", ["emqd.store.hash", "emqd.verbs.claim", "emqd.wire.resp",
                                    "emqd.persist.records", "emqd.commands.connection"])
def test_each_package_of_the_core_imports_first_in_a_fresh_interpreter(module: str) -> None:
    """A user's `from emqd.store.zset import ZSet` imports the package before the
    core's library is loaded: a compiled package init once broke exactly that."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_compiled_core_is_no_older_than_its_sources() -> None:
    """An edit after the build would otherwise silently not run: rebuild
    (`pip install -e .`, as scripts/test does) or build pure (EMQD_PURE=1)."""
    if core_build() != "mypyc":
        pytest.skip("the pure core runs its sources")
    assert stale_sources() == []


def test_the_expected_core_was_built() -> None:
    expected = "mypyc" if os.environ.get("EMQD_EXPECT_COMPILED") == "1" else core_build()
    assert core_build() == expected
    plan = importlib.import_module("emqd.commit.plan")
    assert (plan.__file__ or "").startswith(str(ROOT / "emqd"))


def test_info_names_the_core(r: redis.Redis) -> None:
    assert r.info("server")["emqd_core"] == core_build()
