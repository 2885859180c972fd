"""The EMQ verbs, one module per verb, each exporting COMMANDS (see runner.py)."""

from emqd.verbs import add, config, epoch, get, pause, queues, resume, stats

ALL = (add, epoch, get, stats, queues, pause, resume, config)
