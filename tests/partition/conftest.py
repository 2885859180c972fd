"""The partition suite's process: a SIGTERM (a CI step's timeout) runs the teardowns, so
that every process and namespace a scenario made is removed, as after a failure."""

from __future__ import annotations

import signal
from types import FrameType


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _interrupted)
