"""The peers' connection pool reuses a fresh idle connection and closes a stale one
(a peer closes connections idle past its idle timeout)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from pinledger.ledger.fake_clock import FakeClock
from pinledger.service.api.peers import PeerPool


class FakeClient:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def listening() -> Iterator[str]:
    """An address that accepts TCP connections (nothing is ever sent on them)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_fresh_idle_connection_is_reused(listening: str) -> None:
    clock = FakeClock()
    pool = PeerPool(clock=clock)
    kept = FakeClient()
    pool._return(listening, kept)
    clock.advance(59)
    assert pool._client(listening) is kept
    assert not kept.closed


def test_a_stale_idle_connection_is_closed_and_replaced(listening: str) -> None:
    clock = FakeClock()
    pool = PeerPool(clock=clock)
    stale = FakeClient()
    pool._return(listening, stale)
    clock.advance(61)
    replacement = pool._client(listening)
    try:
        assert replacement is not stale
        assert stale.closed
    finally:
        replacement.close()
