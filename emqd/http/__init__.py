"""The HTTP side: the web dashboard and /metrics, served by emqd itself (docs/HTTP.md)."""
