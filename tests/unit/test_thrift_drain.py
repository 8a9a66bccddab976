"""A stopping server's Thrift edge (service/api/connections.py): once it stops accepting
(the connections the kernel already took are served, none reset), each connection
answers its next call and closes right behind the answer (`linger`); `drain` then closes
the connections still waiting for a call, lets a call in flight be answered, and
returns when the last connection has ended; the server closes its log only then
(service/server.py)."""

from __future__ import annotations

import select
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


def _eof_waiting(sock: socket.socket) -> bool:
    """What a pooled client checks before reusing a connection: the end is readable."""
    ready, _, _ = select.select([sock], [], [], 2)
    return bool(ready) and sock.recv(1, socket.MSG_PEEK) == b""


def test_a_stopping_server_answers_the_next_call_of_a_connection_then_closes_it(
    served: tuple[ThriftServer, SlowHandler, int],
) -> None:
    """A client of a stopping server sees no error: its pooled connection answers its
    next call, and the end of the stream is there before the client could reuse it."""
    server, _, port = served
    client = connect(port, timeout_ms=10_000)
    assert client.getQueueNames(None) == ["mail"]
    server.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert client.getQueueNames(None) == ["mail"]  # answered, not refused
    assert _eof_waiting(client._iprot.trans.sock)  # then closed behind the answer
    assert server.linger(5), "the connection closed after its call"
    client.close()


def test_connections_the_kernel_took_before_the_stop_are_served_not_reset() -> None:
    handler = SlowHandler()
    port = free_port()
    listener = Listener("127.0.0.1", port)
    listener.bind()
    listener.listen()
    server = ThriftServer(
        TProcessor(pinlater.PinLater, handler), listener, ConnectionLimits(), Metrics()
    )
    # Nothing accepts yet: the kernel completes the connection and holds it.
    client = connect(port, timeout_ms=10_000)
    server.close()
    assert client.getQueueNames(None) == ["mail"]
    client.close()
    assert server.linger(5)


def test_linger_leaves_idle_connections_to_drain(
    served: tuple[ThriftServer, SlowHandler, int],
) -> None:
    server, _, port = served
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    server.close()
    assert not server.linger(0.3), "an idle connection stays until drained"
    assert server.drain(5)
    assert idle.recv(1) == b""
    idle.close()


def test_a_call_in_flight_at_the_stop_keeps_its_connection_for_one_more_call(
    served: tuple[ThriftServer, SlowHandler, int],
) -> None:
    """Its answer left before the stop could cork it: ending the connection right after
    it would race the client's next call (seen as a failed call under load)."""
    server, handler, port = served
    client = connect(port, timeout_ms=10_000)
    handler.hold = True
    answers: list[list[str]] = []
    call = threading.Thread(target=lambda: answers.append(client.getQueueNames(None)))
    call.start()
    assert handler.entered.wait(5)
    server.close()
    handler.release.set()
    call.join(5)
    assert answers == [["mail"]]
    handler.hold = False
    assert client.getQueueNames(None) == ["mail"]  # the next call: answered, the last
    assert _eof_waiting(client._iprot.trans.sock)
    client.close()
