"""The in-memory store: data-structure types below, the keyspace above them."""
