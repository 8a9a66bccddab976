"""The Thrift listening sockets: the public port and a process's private peer port,
where the other servers forward dequeues to it alone (docs/decisions/0019-processes.md).

Only the processes of one `serve --processes` share the public port (SO_REUSEPORT:
the kernel spreads new connections over them). Every other listener binds alone, so a
second server started on a port in use fails with `PortInUseError` instead of quietly
taking half of another server's clients, which may belong to another ledger.
thriftpy2 sets SO_REUSEPORT on every listening socket; `_init_sock` here replaces its
socket setup to decide that on purpose.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable

from thriftpy2.transport import TServerSocket


class PortInUseError(RuntimeError):
    """The port is held by another process; the message says which port and what to do."""


def in_use_message(host: str, port: int) -> str:
    return (
        f"{host}:{port} is already in use by another process (another pinledger serve?): "
        "stop it, or give this server another PINLEDGER_PORT"
    )


class Listener(TServerSocket):
    """A TCP listening socket; `shared` sets SO_REUSEPORT (the public port of a worker
    of `serve --processes`; the supervisor refuses to start where the platform lacks
    it)."""

    def __init__(self, host: str, port: int, shared: bool = False) -> None:
        super().__init__(host=host, port=port, client_timeout=None)  # type: ignore[no-untyped-call]
        self.shared = shared
        self.address = (host, port)

    def _init_sock(self) -> None:
        sock = socket.socket(self.socket_family, socket.SOCK_STREAM)
        # A restarted server rebinds its port while old connections sit in TIME_WAIT;
        # on Linux this does not let it bind a port another socket listens on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.shared and hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.settimeout(None)
        self.sock = sock

    def bind(self) -> None:
        """Take the port now (connections are refused until `listen`): a server binds
        first, before it connects to anything, so a port another process listens on
        fails it at once. Two servers that bind at the same moment both get this far;
        the second to `listen` fails there."""
        if self.sock is not None:
            return
        self._init_sock()
        self._refusing_in_use(lambda sock: sock.bind(self.address))

    def listen(self) -> None:
        self.bind()
        self._refusing_in_use(lambda sock: sock.listen(self.backlog))

    def _refusing_in_use(self, step: Callable[[socket.socket], None]) -> None:
        assert self.sock is not None
        try:
            step(self.sock)
        except OSError as exc:
            self.close()  # type: ignore[no-untyped-call]
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(in_use_message(*self.address)) from None
            raise


def check_port_free(host: str, port: int) -> None:
    """Raise PortInUseError if a process listens on host:port: what a supervisor checks
    before its workers bind the port together (they share it, so they cannot tell a
    sibling from a stranger)."""
    probe = Listener(host, port)
    probe.listen()
    probe.close()  # type: ignore[no-untyped-call]
