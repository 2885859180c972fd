"""Plain Redis commands, one module per family, each exporting COMMANDS.

The dispatcher (emqd/dispatch.py) lists the modules it serves; this package
imports none of them.
"""
