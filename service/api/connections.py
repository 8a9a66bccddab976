"""The Thrift edge's connections: accept, serve, refuse, close (decision 0012).

- At most `max_connections` are served at once, each on its own thread: threads are
  bounded by the setting, never by how many clients connect. Past the limit, a
  connection's first call is answered with an error saying the server is full (nothing
  was applied) and the connection is closed.
- A connection that sends nothing for `idle_timeout_s` is closed (pooled clients
  notice a closed idle connection and open another; pinledger's client does).
- A frame over the limit: when it carries a Thrift call, the rest of the frame is read
  and thrown away (bounded) and the call is answered with an error naming its size and
  the limit (nothing was applied); otherwise the connection is closed. Either way one
  log line names the size and the limit.
- Anything else that is not Thrift: the connection is closed with one log line, rate
  limited, never a traceback. A TLS client on a plaintext port is told apart.
- With TLS (service/security/tls.py), each connection's handshake runs first, on its own thread; a
  client that fails it (plaintext, no or an untrusted certificate) is closed at once
  with one log line.
- A server stopping (`close`, `linger`, then `drain`) accepts no new connection (the
  ones the kernel had already taken are served: none is reset), and each connection is
  closed right after it answers its next call, its writing side first so that the
  client sees the end with the answer: a pooled client (pinledger's checks a connection
  before reusing it) opens its next connection to another server and no caller sees an
  error. Connections that stay idle are closed at the end of the linger. Meanwhile the
  server has left the owners' group (its dequeues are forwarded to the new owners); no
  call is answered after its log is closed.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor
from thriftpy2.transport import (
    TCyFramedTransport,
    TServerSocket,
    TSocket,
    TTransportException,
)

from pinledger.idl import pinlater
from pinledger.service.api.framing import MAX_FRAME_BYTES, FrameRefused, Frames
from pinledger.service.observability import catalogue
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.security.tls import handshake, refusal

log = logging.getLogger(__name__)

OPEN = catalogue.CONNECTIONS_OPEN
CLOSED = catalogue.CONNECTIONS_CLOSED_TOTAL
# A refused connection's first call is read and answered on one of a few threads;
# past them it is closed at once.
_REFUSERS = 4
_REFUSE_TIMEOUT_S = 2.0
# An oversized call is drained only up to this many times the frame limit, and for
# this long; past that the connection is closed without an answer.
_DRAIN_FACTOR = 16
_DRAIN_TIMEOUT_S = 30.0
_PROTOCOLS = TCyBinaryProtocolFactory()
# The first two bytes of a TLS handshake record (type 22, version 3.x), read as the
# top of a frame size: a TLS client speaking to a plaintext port.
_TLS_HANDSHAKE_RECORD = 0x1603


class MalformedCall(Exception):  # noqa: N818 - what a client sent, not our error
    """The call of a frame could not be read: its arguments run past the frame's end,
    a size is negative, a value is nested too deep. `cause` is thriftpy2's error."""

    def __init__(self, cause: Exception) -> None:
        if isinstance(cause, TTransportException):
            why = "the frame ends inside the call"
        else:
            why = f"{type(cause).__name__}: {str(cause)[:200] or '-'}"
        super().__init__(why)
        self.cause = cause


class PinLaterProcessor(TProcessor):
    """thriftpy2's processor, telling a call it cannot read (MalformedCall) from the
    failures of answering one."""

    def process_in(self, iprot: Any) -> Any:
        try:
            return super().process_in(iprot)
        except Exception as exc:
            raise MalformedCall(exc) from exc


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 1024
    # 0: never close an idle connection.
    idle_timeout_s: float = 600.0
    max_frame_bytes: int = MAX_FRAME_BYTES


class ThriftServer:
    """Serves PinLater calls on an already bound listening socket until `close()`."""

    def __init__(
        self,
        processor: TProcessor,
        listener: TServerSocket,
        limits: ConnectionLimits,
        metrics: Metrics,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._processor = processor
        self._tls = tls
        self._listener = listener
        self._limits = limits
        self._metrics = metrics
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._refusers = threading.BoundedSemaphore(_REFUSERS)
        self._open = 0
        self._open_lock = threading.Lock()
        # Notified when a connection ends (`drain` waits for the last one).
        self._ended = threading.Condition(self._open_lock)
        # The connections being served, so that `drain` can end them.
        self._clients: set[TSocket] = set()
        self._closed = threading.Event()
        # Stopping: each connection closes after answering its next call.
        self._lingering = threading.Event()
        # The accept loop runs, and has ended (`close` waits for it: a connection it
        # accepted is counted before `close` returns).
        self._accepting = threading.Event()
        self._accept_done = threading.Event()
        self._draining = threading.Event()
        self._noise = RateLimitedLog(log)

    def serve_forever(self) -> None:
        self._accepting.set()
        try:
            self._accept_until_closed()
        finally:
            self._accept_done.set()

    def _accept_until_closed(self) -> None:
        while not self._closed.is_set():
            try:
                client = self._listener.accept()
            except Exception as exc:
                if self._closed.is_set():
                    return
                self._noise.warning("accepting a connection failed: %s", exc)
                self._closed.wait(0.1)
                continue
            try:
                self._dispatch(client)
            except Exception as exc:  # e.g. no thread could be started: keep accepting
                self._noise.warning("cannot serve a connection: %s: %s", type(exc).__name__, exc)
                _close(client)

    def _dispatch(self, client: TSocket) -> None:
        if self._slots.acquire(blocking=False):
            # Counted from here (not once its thread runs): `linger` and `drain` wait
            # for a connection taken as the server began to stop.
            with self._ended:
                self._clients.add(client)
            try:
                self._start(self._serve, client, "thrift-conn")
            except BaseException:
                with self._ended:
                    self._clients.discard(client)
                    self._ended.notify_all()
                self._slots.release()
                raise
        elif self._refusers.acquire(blocking=False):
            try:
                self._start(self._refuse, client, "thrift-refuse")
            except BaseException:
                self._refusers.release()
                raise
        else:
            self._count_closed("refused")
            _close(client)

    def close(self) -> None:
        """Accept no more connections: the ones the kernel already completed are taken
        first (closing the listening socket would reset them, and their clients would
        see an error), then the listening socket is closed (that also unblocks accept).
        From now on each connection closes once it has answered its next call."""
        self._lingering.set()
        self._closed.set()
        sock = self._listener.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setblocking(False)
                while True:
                    client, _ = sock.accept()
                    client.setblocking(True)
                    self._dispatch(TSocket(sock=client))
        self._listener.close()
        if self._accepting.is_set():
            self._accept_done.wait(2.0)

    def linger(self, timeout_s: float) -> bool:
        """Wait (after `close`) until every connection has closed after its next call,
        at most `timeout_s`; False when some are still open (idle: `drain` ends them)."""
        with self._ended:
            return self._ended.wait_for(lambda: not self._clients, timeout_s)

    def drain(self, timeout_s: float) -> bool:
        """End every connection once the call it has in flight is answered (after
        `close`): its reading side is shut, so a connection waiting for its next call
        ends at once, and one serving a call answers it and then ends. False when some
        were still open after `timeout_s`."""
        with self._ended:
            self._draining.set()
            for client in self._clients:
                _stop_reading(client)
            return self._ended.wait_for(lambda: not self._clients, timeout_s)

    def _start(self, target: Any, client: TSocket, name: str) -> None:
        threading.Thread(target=target, args=(client,), name=name, daemon=True).start()

    def _opened(self, delta: int) -> None:
        with self._open_lock:
            self._open += delta
            self._metrics.set_gauge(OPEN, self._open)

    def _count_closed(self, reason: str) -> None:
        self._metrics.count(CLOSED, reason=reason)

    def _secured(self, client: TSocket, peer: str) -> bool:
        """The connection over TLS when the port speaks it; False (logged) when the
        client failed the handshake."""
        if self._tls is None or client.sock is None:
            return True
        try:
            client.sock = handshake(client.sock, self._tls)
        except (OSError, ValueError) as exc:
            self._noise.warning("refused a connection from %s: %s", peer, refusal(exc))
            return False
        return True

    def _serve(self, client: TSocket) -> None:
        self._opened(1)
        peer = _peer(client)
        reason = "client"
        try:
            if not self._secured(client, peer):
                reason = "tls"
                return
            _set_timeout(client, self._limits.idle_timeout_s or None)
            frames = Frames(client, self._limits.max_frame_bytes)
            itrans = TCyFramedTransport(frames)
            iprot = _PROTOCOLS.get_protocol(itrans)
            oprot = _PROTOCOLS.get_protocol(TCyFramedTransport(client))
            if self._draining.is_set():
                return  # accepted as the server finished stopping
            if self._answer_calls(client, peer, frames, itrans, iprot, oprot):
                reason = "stopping"
        except FrameRefused as refused:
            reason = "oversized"
            self._oversized(client, refused, peer)
        except TimeoutError:
            reason = "idle"
            log.debug("closed %s: idle for %g s", peer, self._limits.idle_timeout_s)
        except TTransportException:
            pass  # the client closed the connection
        except OSError as exc:
            log.debug("connection from %s ended: %s", peer, exc)
        except Exception as exc:
            reason = "garbage"
            self._noise.warning(
                "closed the connection from %s: not a PinLater call (%s: %s)",
                peer,
                type(exc).__name__,
                str(exc)[:200] or "-",
            )
            log.debug("the garbage from %s", peer, exc_info=True)
        finally:
            _close(client)
            self._count_closed(reason)
            with self._ended:
                self._clients.discard(client)
                self._ended.notify_all()
            self._opened(-1)
            self._slots.release()

    def _answer_calls(
        self, client: TSocket, peer: str, frames: Frames, itrans: Any, iprot: Any, oprot: Any
    ) -> bool:
        """Answer the connection's calls until it is drained; True when it ends after
        its last call because the server is stopping."""
        while not self._draining.is_set():
            frames.next()
            itrans.clean()  # each call is read from its own frame only
            last = self._lingering.is_set()
            if last:
                # The connection's last answer: corked, it leaves in one segment with
                # the end of the stream, so the client cannot send another call in
                # between (which would find the connection closed).
                _cork(client)
            try:
                self._processor.process(iprot, oprot)
            except MalformedCall as malformed:
                self._malformed(client, peer, frames.payload, malformed)
            if last:
                # Not after a call that began before the stop: its answer has left
                # uncorked, and the client may be sending its next call already.
                _stop_writing(client)
                return True
        return False

    def _refuse(self, client: TSocket) -> None:
        peer = _peer(client)
        try:
            if not self._secured(client, peer):
                return
            self._noise.warning(
                "refused a connection from %s: %d connections open, the limit "
                "(PINLEDGER_MAX_CONNECTIONS)",
                peer,
                self._limits.max_connections,
            )
            _set_timeout(client, _REFUSE_TIMEOUT_S)
            frames = Frames(client, self._limits.max_frame_bytes)
            frames.next()
            iprot = _PROTOCOLS.get_protocol(TCyFramedTransport(frames))
            name, _, seqid = iprot.read_message_begin()
            message = (
                f"server busy: {self._limits.max_connections} connections open, its limit "
                "(PINLEDGER_MAX_CONNECTIONS); nothing was applied: retry later or on "
                "another server"
            )
            _answer(client, name, seqid, None, message)
        except Exception as exc:
            log.debug("refusing %s: %s", peer, exc)
        finally:
            _close(client)
            self._count_closed("refused")
            self._refusers.release()

    def _malformed(
        self, client: TSocket, peer: str, payload: bytes, malformed: MalformedCall
    ) -> None:
        """A frame that starts a call but does not hold it whole (its arguments run past
        the frame's end, a negative size, ...): answered with PROTOCOL_ERROR, and the
        connection serves on (every call is read from its own frame). A frame that is
        no call at all is garbage: the connection is closed."""
        call = _call_of(payload)
        if call is None:
            raise malformed  # not a call: garbage, the connection is closed
        name, seqid = call
        self._noise.warning(
            "answered a malformed %s call from %s with an error: %s", name, peer, malformed
        )
        _answer(
            client,
            name,
            seqid,
            None,
            f"{name}: the frame does not hold a well-formed call ({malformed}); nothing "
            "was applied",
            TApplicationException.PROTOCOL_ERROR,
        )

    def _oversized(self, client: TSocket, refused: FrameRefused, peer: str) -> None:
        limit = self._limits.max_frame_bytes
        if refused.size >> 16 == _TLS_HANDSHAKE_RECORD:
            self._noise.warning(
                "closed the connection from %s: a TLS handshake on a plaintext port (set "
                "PINLEDGER_TLS_CERTFILE and PINLEDGER_TLS_KEYFILE, or connect without TLS)",
                peer,
            )
            return
        call = None
        if 0 < refused.size <= limit * _DRAIN_FACTOR:
            call = _drain(client, refused)
        self._noise.warning(
            "refused a frame of %d bytes from %s (limit %d bytes, PINLEDGER_MAX_FRAME_BYTES)%s",
            refused.size,
            peer,
            limit,
            f": answered {call[0]} with an error" if call else ": closed the connection",
        )
        if call is None:
            return
        name, seqid = call
        message = (
            f"{name} request of {refused.size} bytes is over the server's frame limit of "
            f"{limit} bytes; nothing was applied: send it in smaller calls"
        )
        code = pinlater.ErrorCode.ENQUEUE_REJECTED if name == "enqueueJobs" else None
        _answer(client, name, seqid, code, message)


_HEAD_BYTES = 512


def _drain(client: TSocket, refused: FrameRefused) -> tuple[str, int] | None:
    """Read the rest of an oversized frame when it is a Thrift call, keeping its start:
    (method name, seqid) once the frame is read whole; None when it is not a call or
    cannot be read (the connection is then closed unanswered)."""
    head = bytearray(refused.head[:_HEAD_BYTES])
    remaining = refused.size - len(refused.head)
    sock = client.sock
    if sock is None:
        return None
    try:
        sock.settimeout(_DRAIN_TIMEOUT_S)
        call = None
        while remaining > 0:
            chunk = sock.recv(min(remaining, 1 << 20))
            if not chunk:
                return None
            remaining -= len(chunk)
            if len(head) < _HEAD_BYTES:
                head += chunk[: _HEAD_BYTES - len(head)]
            if call is None and (len(head) >= _HEAD_BYTES or remaining == 0):
                # Garbage that announced a big frame is not waited for.
                call = _call_of(bytes(head))
                if call is None:
                    return None
        return call if call is not None else _call_of(bytes(head))
    except OSError:
        return None


def _call_of(head: bytes) -> tuple[str, int] | None:
    """The method name and seqid at the start of a strict binary-protocol call."""
    if len(head) < 8 or head[:2] != b"\x80\x01":
        return None
    size = int.from_bytes(head[4:8], "big")
    if len(head) < 12 + size:
        return None
    name = head[8 : 8 + size].decode("utf-8", "replace")
    return name, int.from_bytes(head[8 + size : 12 + size], "big", signed=True)


def _answer(
    client: TSocket,
    name: str,
    seqid: int,
    code: int | None,
    message: str,
    application: int = TApplicationException.INTERNAL_ERROR,
) -> None:
    """Answer one call with a PinLaterException (with `code`) when the method declares
    it, else with a TApplicationException of type `application`."""
    oprot = _PROTOCOLS.get_protocol(TCyFramedTransport(client))
    result_type = getattr(pinlater.PinLater, f"{name}_result", None)
    if code is not None and result_type is not None:
        result = result_type()
        result.e = pinlater.PinLaterException(errorCode=code, message=message)
        oprot.write_message_begin(name, TMessageType.REPLY, seqid)
        result.write(oprot)
    else:
        oprot.write_message_begin(name, TMessageType.EXCEPTION, seqid)
        TApplicationException(application, message).write(oprot)
    oprot.write_message_end()
    oprot.trans.flush()


def _peer(client: TSocket) -> str:
    try:
        host, port = client.sock.getpeername()[:2] if client.sock else ("?", 0)
    except OSError:
        return "a closed connection"
    return f"{host}:{port}"


def _set_timeout(client: TSocket, seconds: float | None) -> None:
    if client.sock is not None:
        client.sock.settimeout(seconds)


def _cork(client: TSocket) -> None:
    """Hold what is written until the end of the stream is sent with it (Linux's
    TCP_CORK; elsewhere the end follows the answer as soon as it can)."""
    sock = client.sock
    cork = getattr(socket, "TCP_CORK", None)
    if sock is None or cork is None:
        return
    with contextlib.suppress(OSError):
        socket.socket.setsockopt(sock, socket.IPPROTO_TCP, cork, 1)


def _stop_writing(client: TSocket) -> None:
    """Send the end of the stream after the answer just written (with it when corked;
    on the plain socket, as `_stop_reading` says why)."""
    sock = client.sock
    if sock is None:
        return
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_WR)


def _stop_reading(client: TSocket) -> None:
    """Shut the connection's reading side: a read waiting for the next call returns at
    the end of the stream, while the answer to a call in flight can still be written.
    On the plain socket even under TLS (SSLSocket.shutdown would drop the TLS layer the
    answer is written through)."""
    sock = client.sock
    if sock is None:
        return
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RD)


def _close(client: TSocket) -> None:
    sock = client.sock
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    client.close()
