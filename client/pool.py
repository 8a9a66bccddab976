"""Pooled Thrift connections, per server: framed transport, binary protocol (the cython
codecs), a connect timeout and a read timeout.

A connection is used by one thread at a time. An idle connection whose server has
closed it (a restart, an idle timeout) is noticed before use and replaced, so a call
is not sent on a dead socket.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TClient
from thriftpy2.transport import TCyFramedTransportFactory, TSocket, TSSLSocket

from pinledger.client.servers import Address
from pinledger.idl import pinlater

_TRANSPORTS = TCyFramedTransportFactory()
_PROTOCOLS = TCyBinaryProtocolFactory()


@dataclass(slots=True)
class Connection:
    address: Address
    client: Any
    sock: socket.socket | None

    def alive(self) -> bool:
        """An idle connection is healthy when nothing is waiting to be read: readable
        means the server closed it (EOF) or sent something unasked for."""
        if self.sock is None:
            return False
        # poll, not select: an application's descriptors may run past select's 1024.
        waiting = select.poll()
        try:
            waiting.register(self.sock, select.POLLIN)
            return not waiting.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        # Closing a broken connection may fail again; it is gone either way.
        with contextlib.suppress(Exception):
            self.client.close()


def open_connection(
    address: Address,
    connect_timeout_s: float,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> Connection:
    """Connect (over TLS with `tls`); raises OSError (ssl.SSLError among them) or
    thriftpy2's TTransportException when it cannot."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    timeouts = {
        "socket_family": family,
        "socket_timeout": int(timeout_s * 1000),
        "connect_timeout": int(connect_timeout_s * 1000),
    }
    tsocket = (
        TSocket(address.host, address.port, **timeouts)
        if tls is None
        else TSSLSocket(address.host, address.port, ssl_context=tls, **timeouts)
    )
    transport = _TRANSPORTS.get_transport(tsocket)
    transport.open()
    client = TClient(pinlater.PinLater, _PROTOCOLS.get_protocol(transport))
    return Connection(address, client, tsocket.sock)


class ConnectionPool:
    """Idle connections per server, at most `max_idle` each; more are opened on demand
    and closed when returned to a full pool."""

    def __init__(
        self,
        connect_timeout_s: float = 2.0,
        timeout_s: float = 30.0,
        max_idle: int = 8,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.tls = tls
        self.connect_timeout_s = connect_timeout_s
        self.timeout_s = timeout_s
        self.max_idle = max_idle
        self._idle: dict[Address, list[Connection]] = defaultdict(list)
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, address: Address) -> tuple[Connection, bool]:
        """A connection to `address`, and whether it was freshly opened."""
        while True:
            with self._lock:
                idle = self._idle[address]
                connection = idle.pop() if idle else None
            if connection is None:
                connection = open_connection(
                    address, self.connect_timeout_s, self.timeout_s, self.tls
                )
                return connection, True
            if connection.alive():
                return connection, False
            connection.close()

    def release(self, connection: Connection) -> None:
        with self._lock:
            idle = self._idle[connection.address]
            if not self._closed and len(idle) < self.max_idle:
                idle.append(connection)
                return
        connection.close()

    def discard(self, connection: Connection) -> None:
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for connection in connections:
            connection.close()
