"""Clients as commands see them: Pub/Sub's registry and clients parked on keys (a
`Session` itself is in emqd/core.py, beside the Core it reaches)."""
