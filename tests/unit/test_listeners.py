"""The listening sockets: a port in use is refused (PortInUseError, naming the port and
what to do) unless every socket on it is one of `serve --processes`' shared ones."""

from __future__ import annotations

import socket

import pytest

from pinledger.service.listeners import Listener, PortInUseError, check_port_free
from pinledger.service.testing.servers import free_port

HOST = "127.0.0.1"


def test_a_second_listener_on_a_port_in_use_is_refused_with_the_port_named() -> None:
    port = free_port()
    first = Listener(HOST, port)
    first.listen()
    try:
        with pytest.raises(PortInUseError, match=rf"{HOST}:{port} is already in use"):
            Listener(HOST, port).listen()
        with pytest.raises(PortInUseError):
            Listener(HOST, port, shared=True).listen()
    finally:
        first.close()  # type: ignore[no-untyped-call]


def test_of_two_servers_binding_at_once_the_second_to_listen_is_refused() -> None:
    port = free_port()
    first, second = Listener(HOST, port), Listener(HOST, port)
    first.bind()
    try:
        second.bind()  # neither listens yet: both may hold the address
        first.listen()
        with pytest.raises(PortInUseError):
            second.listen()
        with pytest.raises(PortInUseError):
            check_port_free(HOST, port)
    finally:
        first.close()  # type: ignore[no-untyped-call]


def test_shared_listeners_share_the_port_and_accept() -> None:
    port = free_port()
    a, b = Listener(HOST, port, shared=True), Listener(HOST, port, shared=True)
    a.listen()
    try:
        b.listen()
        with socket.create_connection((HOST, port), timeout=5):
            pass
        # A plain server, or a supervisor's check, still sees the port as taken.
        with pytest.raises(PortInUseError):
            check_port_free(HOST, port)
    finally:
        a.close()  # type: ignore[no-untyped-call]
        b.close()  # type: ignore[no-untyped-call]


def test_a_port_is_free_again_once_closed() -> None:
    port = free_port()
    first = Listener(HOST, port)
    first.listen()
    with socket.create_connection((HOST, port), timeout=5) as conn:
        accepted = first.accept()  # type: ignore[no-untyped-call]
        conn.close()
        accepted.close()
    first.close()  # type: ignore[no-untyped-call]
    check_port_free(HOST, port)  # no PortInUseError: TIME_WAIT does not hold it
    again = Listener(HOST, port)
    again.listen()
    again.close()  # type: ignore[no-untyped-call]
