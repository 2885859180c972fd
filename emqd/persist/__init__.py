"""Durability: the append-only file (protocol section 9).

`records` turns plans into RESP, `load` reads a file back into the keyspace,
`aof` appends and fsyncs while the server runs, `rewrite` compacts the file in
the background, `check` is `emqd --check-aof`, and `dirlock` keeps one emqd to
a directory. The commands BGREWRITEAOF, SAVE and LASTSAVE are in
emqd/commands/persistence.py.
"""
