"""EMQ.FRONTS on a single process, through the wire: one address, the one the client
reached (a cluster's answer: tests/cluster/test_client.py)."""

from __future__ import annotations

import pytest
import redis

from tests.support import start_emqd


def test_a_single_process_answers_the_address_its_client_reached(emqd_port: int) -> None:
    with redis.Redis(port=emqd_port) as client:
        assert client.execute_command("EMQ.FRONTS") == [f"127.0.0.1:{emqd_port}".encode()]
        with pytest.raises(redis.ResponseError,
                           match="wrong number of arguments for 'emq.fronts' command"):
            client.execute_command("EMQ.FRONTS", "extra")
    with redis.Redis(port=emqd_port, protocol=3) as client:
        assert client.execute_command("EMQ.FRONTS") == [f"127.0.0.1:{emqd_port}".encode()]


def test_not_its_bind_address_which_no_client_can_connect_to() -> None:
    """Bound to every interface, the process answers where this client reached it, while
    EMQ.OWNER names it by `--bind:--port` (the address other fronts would use)."""
    server = start_emqd("--bind", "0.0.0.0", "--requirepass", "pw")
    try:
        with redis.Redis(port=server.port, password="pw") as client:
            assert client.execute_command("EMQ.FRONTS") == [f"127.0.0.1:{server.port}".encode()]
            assert client.execute_command("EMQ.OWNER", "q") == f"0.0.0.0:{server.port}".encode()
        with redis.Redis(port=server.port) as anonymous, \
                pytest.raises(redis.AuthenticationError):
            anonymous.execute_command("EMQ.FRONTS")  # like every verb, after AUTH
    finally:
        server.stop()
