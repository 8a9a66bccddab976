"""A stopping server's Thrift edge (service/api/connections.py): once it stops accepting,
`drain` closes the connections waiting for their next call at once, lets a call in
flight be answered, and returns when the last connection has ended; the server only
then leaves the owners' group and closes its log (service/server.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TTransportException

from pinledger.idl import pinlater
from pinledger.service.api.connections import ConnectionLimits, ThriftServer
from pinledger.service.listeners import Listener
from pinledger.service.observability.metrics import Metrics
from pinledger.service.testing.servers import connect, free_port


class SlowHandler:
    """getQueueNames waits for the test while `hold` is set."""

    def __init__(self) -> None:
        self.hold = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def getQueueNames(self, context: Any) -> set[str]:  # noqa: N802 (the wire's name)
        if self.hold:
            self.entered.set()
            assert self.release.wait(10)
        return {"mail"}


@pytest.fixture
def served() -> Iterator[tuple[ThriftServer, SlowHandler, int]]:
    handler = SlowHandler()
    port = free_port()
    listener = Listener("127.0.0.1", port)
    listener.bind()
    listener.listen()
    server = ThriftServer(
        TProcessor(pinlater.PinLater, handler), listener, ConnectionLimits(), Metrics()
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, handler, port
    finally:
        handler.release.set()
        server.close()
        listener.close()  # type: ignore[no-untyped-call]


def test_drain_answers_the_call_in_flight_and_closes_the_idle_connections(
    served: tuple[ThriftServer, SlowHandler, int],
) -> None:
    server, handler, port = served
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    busy = connect(port, timeout_ms=10_000)
    assert busy.getQueueNames(None) == ["mail"]
    handler.hold = True
    answers: list[list[str]] = []
    call = threading.Thread(target=lambda: answers.append(busy.getQueueNames(None)))
    call.start()
    assert handler.entered.wait(5)

    server.close()
    drained: list[bool] = []
    draining = threading.Thread(target=lambda: drained.append(server.drain(10)))
    draining.start()
    try:
        assert idle.recv(1) == b""  # closed at once: it had no call in flight
        assert draining.is_alive()  # the busy connection's call is still being served
    finally:
        handler.release.set()
        call.join(5)
        draining.join(5)
        idle.close()
    assert answers == [["mail"]]
    assert drained == [True]
    with pytest.raises(TTransportException):
        busy.getQueueNames(None)  # its connection ended after the answer
    busy.close()
