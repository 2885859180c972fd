"""`Session`, one client's state as commands see it, is defined in emqd/core.py.

It is there beside the `Core` each session reaches and which holds the sessions
(`clients`, the router's calls), so that neither module imports the other: this
module only names it for the modules that import it from here.
"""

from __future__ import annotations

from emqd.core import Session as Session

__all__ = ["Session"]
