"""emqd: a job-queue server that speaks the Redis protocol (RESP)."""

__version__ = "0.1.0"


def core_build() -> str:
    """"mypyc" when the core runs as the C extension modules setup.py compiles,
    "pure" when it runs as Python source (no compiler at install, or EMQD_PURE=1).
    INFO and the startup log say which, since the two differ about sixfold in speed."""
    from emqd.compat.numbers import COMPILED

    return "mypyc" if COMPILED else "pure"
