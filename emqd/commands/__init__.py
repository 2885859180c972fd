"""Plain Redis commands, one module per family, each exporting COMMANDS."""

from emqd.commands import (
    config,
    connection,
    expiry,
    function,
    hash,
    keys,
    memory,
    pubsub,
    random_members,
    server,
    zset,
    zset_algebra,
    zset_pops,
)
from emqd.persist import commands as persist

ALL = (connection, keys, expiry, hash, zset, zset_algebra, zset_pops, random_members, pubsub,
       server, config, function, persist, memory)
