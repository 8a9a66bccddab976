"""Forwarding dequeues to the servers that own a queue's other partitions: a small
pool of framed Thrift clients per peer address.

A forward is waited for up to the pool's timeout, longer than the peer's longest claim
append (Config.forward_timeout_s): given up sooner, a peer still appending its claims
would hand the jobs to nobody. One case is not waited out: a peer that has not answered
for `abandon_after_s` and is no longer a member of the owners' group (`gone`). A server
frozen (SIGSTOP, a stalled VM) keeps its listening socket, so forwards to it hang; once
the group has evicted it (its session timeout) and moved its partitions, whatever it
does on waking is fenced (it hands out no job while its lease has lapsed, and a late
claim of its is rejected by the log's order, decision 0039), so the caller stops
waiting and answers what it has: its worker polls again and reaches the new owner.
A slow peer that is still a member is waited for as before.
"""

from __future__ import annotations

import select
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TCyFramedTransportFactory

from pinledger.idl import pinlater
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.config import Config

_IDLE_PER_PEER = 8
# A pooled connection idle longer than this is closed instead of reused: a peer closes
# connections idle past its PINLEDGER_IDLE_TIMEOUT_S (600 s by default), and a
# forwarded dequeue sent on a connection the peer closed would fail.
_MAX_IDLE_S = 60.0
# A forward waits for its answer in slices of this, to look between them whether the
# peer is still in the owners' group (an answer that arrives ends the wait at once).
_WAIT_SLICE_S = 0.1
# A forward to a peer that has left the group is given up once it has waited this long:
# far longer than a forward takes (a few ms), so that an answer already on its way (a
# server stopping answers its calls as it leaves) is still taken.
ABANDON_AFTER_S = 2.0


class PeerGoneError(Exception):
    """A forwarded dequeue given up: the peer has not answered and has left the
    owners' group."""


class PeerPool:
    def __init__(
        self,
        timeout_ms: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tls: ssl.SSLContext | None = None,
        abandon_after_s: float = ABANDON_AFTER_S,
    ) -> None:
        """`timeout_ms`: how long a forwarded dequeue is waited for; None: the default
        config's (Config.forward_timeout_s, which outlasts the peer's claim append).
        `tls`: the peers' Thrift ports speak TLS (service/security/tls.py peer_tls).
        `abandon_after_s`: how long a forward to a peer that left the group is waited."""
        self.timeout_ms = (
            round(Config().forward_timeout_s * 1000) if timeout_ms is None else timeout_ms
        )
        self.abandon_after_s = abandon_after_s
        self._tls = tls
        self._clock = clock
        # Per peer: (client, when it was returned), the freshest last.
        self._idle: dict[str, list[tuple[Any, float]]] = {}
        self._lock = threading.Lock()

    def _client(self, address: str) -> Any:
        stale: list[Any] = []
        fresh = None
        with self._lock:
            idle = self._idle.get(address, [])
            horizon = self._clock.monotonic() - _MAX_IDLE_S
            while idle and fresh is None:
                client, returned_at = idle.pop()
                if returned_at >= horizon:
                    fresh = client
                else:
                    stale.append(client)
        for client in stale:
            client.close()
        if fresh is not None:
            return fresh
        host, _, port = address.rpartition(":")
        return make_client(
            pinlater.PinLater,
            host,
            int(port),
            proto_factory=TCyBinaryProtocolFactory(),
            trans_factory=TCyFramedTransportFactory(),
            timeout=self.timeout_ms,
            ssl_context=self._tls,
        )

    def _return(self, address: str, client: Any) -> None:
        with self._lock:
            idle = self._idle.setdefault(address, [])
            if len(idle) < _IDLE_PER_PEER:
                idle.append((client, self._clock.monotonic()))
                return
        client.close()

    def dequeue(
        self,
        address: str,
        caller: Caller | None,
        request: DequeueRequest,
        limit: int,
        gone: Callable[[], bool] | None = None,
    ) -> Any:
        """dequeueOwned on a peer, for up to `limit` jobs of the request's queue.
        `gone`: whether the peer has left the owners' group (asked only while a forward
        has waited `abandon_after_s`; then PeerGoneError)."""
        context = (
            None
            if caller is None
            else pinlater.RequestContext(source=caller.source, requestId=caller.request_id)
        )
        forwarded = pinlater.PinLaterDequeueRequest(
            queueName=request.queue,
            limit=limit,
            dryRun=request.dry_run,
            coverage=request.coverage,
        )
        client = self._client(address)
        try:
            if gone is None:
                response = client.dequeueOwned(context, forwarded)
            else:
                # thriftpy2's client call in its two halves, so that the wait between
                # them can look at the group (TClient._send/_recv, thriftpy2 0.7).
                client._send("dequeueOwned", context=context, request=forwarded)
                self._await_answer(client, address, request.queue, gone)
                response = client._recv("dequeueOwned")
        except Exception:
            client.close()  # a broken connection must not go back to the pool
            raise
        self._return(address, client)
        return response

    def _await_answer(
        self, client: Any, address: str, queue: str, gone: Callable[[], bool]
    ) -> None:
        """Return once the peer's answer has begun to arrive; raise PeerGoneError once
        it has waited `abandon_after_s` for a peer that left the group, TimeoutError
        once the pool's timeout has passed with nothing (as a plain call's socket
        timeout would)."""
        sock = client._iprot.trans.sock  # the framed transport's socket (TLS: an SSLSocket)
        # poll, not select: a busy server's descriptors run past select's 1024.
        answer = select.poll()
        answer.register(sock, select.POLLIN)
        started = time.monotonic()
        deadline = started + self.timeout_ms / 1000
        while True:
            if isinstance(sock, ssl.SSLSocket) and sock.pending():
                return  # decrypted bytes already wait in the TLS layer
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError(
                    f"{address} did not answer a forwarded dequeue of {queue!r} "
                    f"within {self.timeout_ms / 1000:g} s"
                )
            # Readable, or hung up / in error: _recv then reads the answer or the failure.
            if answer.poll(max(1, round(1000 * min(_WAIT_SLICE_S, deadline - now)))):
                return
            waited = time.monotonic() - started
            if waited >= self.abandon_after_s and gone():
                raise PeerGoneError(
                    f"{address} has not answered in {waited:.1f} s and is no longer in the "
                    f"owners' group (frozen or cut off; its partitions of {queue!r} moved "
                    "to the servers left): not waiting for it"
                )

    def close(self) -> None:
        with self._lock:
            pools, self._idle = self._idle, {}
        for idle in pools.values():
            for client, _ in idle:
                client.close()
