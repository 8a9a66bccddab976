"""A server the client cannot connect to is tried after the others for a backoff
(client/health.py): a host that is gone costs its connect timeout once per backoff, not
on every call that would try it first; when no other server serves the call it is
still tried, and a connect that works brings it back."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.errors import ServerUnavailableError
from pinledger.client.health import MAX_BACKOFF_S, ServerHealth
from pinledger.client.pool import Connection
from pinledger.client.servers import Address, parse_address
from pinledger.ledger.fake_clock import FakeClock

DEAD = parse_address("10.0.0.1:9010")
LIVE = parse_address("10.0.0.2:9010")
OTHER = parse_address("10.0.0.3:9010")


def test_nothing_set_aside_keeps_the_order() -> None:
    health = ServerHealth(FakeClock())
    assert health.order([DEAD, LIVE, OTHER]) == [DEAD, LIVE, OTHER]


def test_a_failed_server_goes_last_until_its_backoff_ends() -> None:
    clock = FakeClock()
    health = ServerHealth(clock)
    health.failed(DEAD, TimeoutError("timed out"))
    assert health.order([DEAD, LIVE, OTHER]) == [LIVE, OTHER, DEAD]
    assert health.set_aside() == [DEAD]
    clock.advance(1.01)
    assert health.order([DEAD, LIVE, OTHER]) == [DEAD, LIVE, OTHER]


def test_the_backoff_doubles_with_each_failure_in_a_row_up_to_its_cap() -> None:
    clock = FakeClock()
    health = ServerHealth(clock)
    waits = []
    for _ in range(8):
        health.failed(DEAD, TimeoutError("timed out"))
        waited = 0.0
        while health.set_aside():
            clock.advance(0.5)
            waited += 0.5
        waits.append(waited)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF_S, MAX_BACKOFF_S, MAX_BACKOFF_S]


def test_a_connect_that_works_clears_the_mark_and_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    health = ServerHealth(clock)
    with caplog.at_level(logging.INFO, logger="pinledger.client.health"):
        health.failed(DEAD, ConnectionRefusedError("refused"))
        health.failed(DEAD, ConnectionRefusedError("refused"))
        health.connected(DEAD)
        assert health.set_aside() == []
        health.failed(DEAD, ConnectionRefusedError("refused"))
    clock.advance(1.01)  # the first backoff again, not the third
    assert health.set_aside() == []
    # One line when it was set aside (not one per failure in a row), one when it was
    # back, one when it was set aside again.
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "10.0.0.1:9010 cannot be connected to (refused)" in lines[0]
    assert "10.0.0.1:9010 can be connected to again" in lines[1]
    assert "cannot be connected to" in lines[2]


class _Thrift:
    def getQueueNames(self, context: Any) -> list[str]:  # noqa: N802 - the IDL's name
        return ["q"]


class _Pool:
    """Connects to the servers in `live` only; the others time out."""

    def __init__(self, live: set[Address]) -> None:
        self.live = live
        self.tries: list[Address] = []

    def acquire(self, address: Address) -> tuple[Connection, bool]:
        self.tries.append(address)
        if address not in self.live:
            raise TimeoutError("timed out")
        return Connection(address, _Thrift(), None), True

    def release(self, connection: Connection) -> None:
        pass

    def discard(self, connection: Connection) -> None:
        pass

    def close(self) -> None:
        pass


def _client(clock: FakeClock, pool: _Pool) -> PinLaterClient:
    client = PinLaterClient([str(DEAD), str(LIVE)], clock=clock, retry_backoff_s=0)
    client.pool = pool  # type: ignore[assignment]
    return client


def test_a_host_that_is_gone_costs_one_connect_per_backoff_not_one_per_call() -> None:
    clock = FakeClock()
    pool = _Pool(live={LIVE})
    client = _client(clock, pool)
    for _ in range(10):
        assert client.queue_names() == {"q"}
    # Round robin would have tried DEAD first in 5 of the 10 calls.
    assert pool.tries.count(DEAD) == 1
    assert pool.tries.count(LIVE) == 10
    clock.advance(1.01)  # its backoff is over: tried in its turn, set aside again (2 s)
    for _ in range(10):
        client.queue_names()
    assert pool.tries.count(DEAD) == 2


def test_a_server_set_aside_is_still_tried_when_no_other_serves() -> None:
    clock = FakeClock()
    pool = _Pool(live={LIVE})
    client = _client(clock, pool)
    client.queue_names()
    client.queue_names()  # DEAD is set aside now, whichever came first
    assert client.health.set_aside() == [DEAD]
    pool.live = {DEAD}  # LIVE's host goes, DEAD's comes back
    assert client.queue_names() == {"q"}
    assert client.health.set_aside() == [LIVE]
    pool.live = set()
    with pytest.raises(ServerUnavailableError, match="cannot connect"):
        client.queue_names()
