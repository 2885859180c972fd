"""Sorted-set commands (section 7 of the protocol): to be filled in."""

from __future__ import annotations

COMMANDS: list = []
