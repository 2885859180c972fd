"""Clients as commands see them: a session's state, Pub/Sub's registry, clients parked on keys."""
