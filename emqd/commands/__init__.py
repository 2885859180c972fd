"""Plain Redis commands, one module per family, each exporting COMMANDS."""

from emqd.commands import config, connection, function, hash, keys, pubsub, server, zset
from emqd.persist import commands as persist

ALL = (connection, keys, hash, zset, pubsub, server, config, function, persist)
