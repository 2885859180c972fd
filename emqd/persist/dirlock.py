"""One emqd per directory: the flock its log (and `emqd --check-aof --fix`) holds on it."""

from __future__ import annotations

import fcntl
import logging
import os

log = logging.getLogger("emqd")


def lock_dir(path: str) -> int | None:
    """Refuse to share a directory: two processes appending to one file would interleave.

    Returns the directory's fd, flocked until closed (None on a file system
    without flock, with a warning); OSError while another process holds it.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(f"{path} is in use by another emqd (one process per --dir)") from None
    except OSError as exc:  # a file system without flock: go on, unguarded
        log.warning("cannot lock %s (%s); make sure no other emqd uses it", path, exc)
        os.close(fd)
        return None
    return fd
