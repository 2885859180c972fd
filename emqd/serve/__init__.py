"""The server's process: start and stop, sockets, limits, housekeeping, and what it
counts about itself."""
