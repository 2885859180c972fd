"""The EMQ verbs, one module per verb, each exporting COMMANDS (see runner.py)."""

from emqd.verbs import add, epoch

ALL = (add, epoch)
