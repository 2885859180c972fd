"""The EMQ verbs, one module per verb, each exporting COMMANDS."""

ALL: tuple = ()
