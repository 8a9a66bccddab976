"""The Thrift listening sockets: the public port, shared by every process of a host
(SO_REUSEPORT: the kernel spreads new connections over them), and a process's private
peer port, where the other servers forward dequeues to it alone
(docs/decisions/0019-processes.md)."""

from __future__ import annotations

import socket

from thriftpy2.transport import TServerSocket


class SharedListener(TServerSocket):
    """The public port. thriftpy2 sets SO_REUSEPORT where the platform has it; this
    says so on purpose, since the processes of `serve --processes` depend on it (the
    supervisor refuses to start where the platform lacks it)."""

    def _init_sock(self) -> None:
        super()._init_sock()  # type: ignore[no-untyped-call]
        assert self.sock is not None
        if hasattr(socket, "SO_REUSEPORT"):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


class PrivateListener(TServerSocket):
    """A peer port: one process only, so no SO_REUSEPORT (a second process binding it
    by mistake fails instead of taking half of another's forwarded dequeues)."""

    def _init_sock(self) -> None:
        sock = socket.socket(self.socket_family, socket.SOCK_STREAM)
        # A restarted worker rebinds its port while old connections sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.settimeout(None)
        self.sock = sock
