"""A pooled connection is checked before reuse: open and quiet, it is reused; closed by
its server, it is not. The check works for any descriptor: an application holding more
than 1,024 files (select's limit) still reuses its connections."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator

import pytest

from pinledger.client.pool import Connection
from pinledger.client.servers import parse_address

ADDRESS = parse_address("127.0.0.1:9010")


@pytest.fixture
def many_files() -> Iterator[None]:
    """More than 1,024 descriptors open, so that the next socket's is above them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    held = [socket.socket() for _ in range(1100)]
    try:
        yield
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("crowded", [False, True])
def test_an_open_connection_is_alive_and_one_its_server_closed_is_not(
    crowded: bool, request: pytest.FixtureRequest
) -> None:
    if crowded:
        request.getfixturevalue("many_files")
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        try:
            assert (client.fileno() > 1024) is crowded
            connection = Connection(ADDRESS, None, client)
            assert connection.alive()
            peer.close()
            deadline = time.monotonic() + 2
            while connection.alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not connection.alive()
        finally:
            client.close()
            peer.close()
