"""Durability: the append-only file (protocol section 9).

`records` turns plans into RESP, `load` reads a file back into the keyspace,
`aof` appends and fsyncs while the server runs, `rewrite` compacts the file in
the background, and `commands` holds BGREWRITEAOF, SAVE and LASTSAVE.
"""
