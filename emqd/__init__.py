"""emqd: a job-queue server that speaks the Redis protocol (RESP)."""

__version__ = "0.1.0"
