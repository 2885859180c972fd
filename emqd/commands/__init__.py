"""Plain Redis commands, one module per family, each exporting COMMANDS."""

from emqd.commands import connection, hash, keys, server, zset

ALL = (connection, keys, hash, zset, server)
